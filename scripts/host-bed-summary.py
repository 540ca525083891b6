#!/usr/bin/env python3
"""host-bed-summary.py: the host transport's measurements (collmm-bench --json files of
scripts/gpu-host-bed) as one markdown table per op: per shape, t_gemm, t_comm, max(t_gemm, t_comm),
every algorithm's time over that maximum, the best overlapped algorithm and its speedup over the
baseline, the GEMMs' rate beside the comm (--gemm-rate) and the model's pred/meas where present.
The algorithms are those in the files, in collmm-bench's order; the first of a shape (collmm-bench
runs its baseline, the first of `collmm-bench --list-algos`, first) is the baseline.
Usage: scripts/host-bed-summary.py FILE.json... (or a folder holding them)"""
import json
import os
import sys


def rows_of(paths):
    for path in paths:
        if os.path.isdir(path):
            yield from rows_of(sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".json")))
            continue
        try:
            doc = json.load(open(path))
        except (ValueError, OSError):
            continue
        if isinstance(doc, dict) and "results" in doc:
            for r in doc["results"]:
                yield os.path.basename(path), r


def main(paths):
    shapes = {}
    for name, r in rows_of(paths):
        key = (r["op"], r["world_size"], r["m"], r["n"], r["k"], name)
        shapes.setdefault(key, []).append(r)
    algos = list(dict.fromkeys(r["algo"] for rows in shapes.values() for r in rows))
    for op in dict.fromkeys(k[0] for k in shapes):
        keys = sorted(k for k in shapes if k[0] == op)
        print(f"\n{op} (bf16, times in us; x = time / max(t_gemm, t_comm))\n")
        print("| P | M | N | t_gemm | t_comm | comm/gemm | max | " + "".join(f"{a} x | " for a in algos) +
              "best | best x | best speedup | GEMM rate | pred/meas |")
        print("|" + "---|" * (12 + len(algos)))
        for key in keys:
            rows = shapes[key]
            base = rows[0]
            if base["t_gemm_us"] is None or base["t_comm_us"] is None:
                continue
            tg, tc = base["t_gemm_us"], base["t_comm_us"]
            top = max(tg, tc)
            by = {r["label"]: r for r in rows}
            cell = lambda label: f"{by[label]['time_us'] / top:.3f}" if label in by else "-"
            over = rows[1:]
            best = min(over, key=lambda r: r["time_us"]) if over else None
            rates = [r["gemm_rate_beside_comm"] for r in over if r.get("gemm_rate_beside_comm")]
            preds = [r["predicted_us"] / r["time_us"] for r in rows if r.get("predicted_us")]
            cells = [key[1], key[2], key[3], f"{tg:.0f}", f"{tc:.0f}", f"{tc / tg:.2f}", f"{top:.0f}",
                     *(cell(a) for a in algos),
                     best["label"] if best else "-", f"{best['time_us'] / top:.3f}" if best else "-",
                     f"{best['speedup_vs_sequential']:.2f}" if best else "-",
                     f"{min(rates):.3f}-{max(rates):.3f}" if rates else "-",
                     f"{min(preds):.2f}-{max(preds):.2f}" if preds else "-"]
            print("| " + " | ".join(str(c) for c in cells) + " |")

if __name__ == "__main__":
    main(sys.argv[1:] or ["."])

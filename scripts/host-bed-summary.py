#!/usr/bin/env python3
"""host-bed-summary.py: the host transport's measurements (collmm-bench --json files of
scripts/gpu-host-bed) as one markdown table per op: per shape, t_gemm, t_comm, max(t_gemm, t_comm),
every algorithm's time over that maximum, the best overlapped algorithm, the ring's speedup over
sequential, the GEMMs' rate beside the comm (--gemm-rate) and the model's pred/meas where present.
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
    for op in ("ag_gemm", "gemm_rs"):
        keys = sorted(k for k in shapes if k[0] == op)
        if not keys:
            continue
        print(f"\n{op} (bf16, times in us; x = time / max(t_gemm, t_comm))\n")
        print("| P | M | N | t_gemm | t_comm | comm/gemm | max | " +
              "sequential x | pipelined x | ring x | bidir x | best | best x | ring speedup | GEMM rate | pred/meas |")
        print("|" + "---|" * 16)
        for key in keys:
            rows = shapes[key]
            seq = next((r for r in rows if r["algo"] == "sequential"), None)
            if not seq or seq["t_gemm_us"] is None or seq["t_comm_us"] is None:
                continue
            tg, tc = seq["t_gemm_us"], seq["t_comm_us"]
            top = max(tg, tc)
            by = {r["label"]: r for r in rows}
            cell = lambda label: f"{by[label]['time_us'] / top:.3f}" if label in by else "-"
            over = [r for r in rows if r["algo"] != "sequential"]
            best = min(over, key=lambda r: r["time_us"]) if over else None
            ring = by.get("ring")
            rates = [r["gemm_rate_beside_comm"] for r in over if r.get("gemm_rate_beside_comm")]
            preds = [r["predicted_us"] / r["time_us"] for r in rows if r.get("predicted_us")]
            cells = [key[1], key[2], key[3], f"{tg:.0f}", f"{tc:.0f}", f"{tc / tg:.2f}", f"{top:.0f}",
                     cell("sequential"), cell("pipelined"), cell("ring"), cell("bidir"),
                     best["label"] if best else "-", f"{best['time_us'] / top:.3f}" if best else "-",
                     f"{ring['speedup_vs_sequential']:.2f}" if ring else "-",
                     f"{min(rates):.3f}-{max(rates):.3f}" if rates else "-",
                     f"{min(preds):.2f}-{max(preds):.2f}" if preds else "-"]
            print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])

#!/usr/bin/env python3
"""demo-report.py: the demo's two readings of collmm-bench's JSON.

  shape OP M N K PROBE.json   the next shape for OP: its free size (N for ag_gemm, K for gemm_rs
                              and gemm_ar: the one its comm does not depend on) scaled so that the
                              sequential plan's comm and GEMMs take the same time, and M scaled so
                              that the sequential iteration takes about TARGET_MS (default 40).
  summary CORES RANKS LOAD RESULTS.json...
                              per op: the best algorithm, its speedup over sequential, its overlap
                              efficiency E and hidden%, and its picture; then what the figures can
                              and cannot say on this machine.
"""
import json
import os
import sys

TARGET_MS = float(os.environ.get("TARGET_MS", "40"))


def rows(path):
    return json.load(open(path))["results"]


def round_to(x, step, lo, hi):
    return int(min(hi, max(lo, step * round(x / step))))


def shape(op, m, n, k, probe):
    seq = next(r for r in rows(probe) if r["algo"] == "sequential")
    t_gemm, t_comm = seq["t_gemm_us"], seq["t_comm_us"]
    ratio = t_comm / t_gemm  # the GEMMs scale with the free size, the comm does not
    if op == "ag_gemm":
        n = round_to(n * ratio, 16, 16, 8192)
    else:
        k = round_to(k * ratio, 16, 16, 8192)
    # Both scale with M: the new sequential time is about 2 t_comm (comm and GEMMs equal).
    m = round_to(m * TARGET_MS * 1000 / (2 * t_comm), 256, 256, 32768)
    print(m, n, k)


def summary(cores, ranks, load, paths):
    ok, checked = True, True
    print("demo summary: per op, the fastest overlapped algorithm against sequential (the plain")
    print("collective, then one GEMM), on the shape chosen above for this machine:")
    print(f"  {'op':8} {'M N K':>16} {'t_gemm':>9} {'t_comm':>9} {'best':>10} {'speedup':>8} {'E':>6} {'hidden%':>8}  picture")
    noisy, waited = [], []
    for path in paths:
        results = rows(path)
        seq = next(r for r in results if r["algo"] == "sequential")
        others = [r for r in results if r["algo"] != "sequential"]
        best = min(others, key=lambda r: r["time_us"])
        op, label = best["op"], best["label"]
        picture = f"out/timeline-{op}-{label.replace(':', '-')}.svg"
        size = f"{best['m']} {best['n']} {best['k']}"
        e = best["overlap_efficiency"] if best["overlap_efficiency"] is not None else float("nan")
        hidden = 100 * (best["overlap_hidden_fraction"] or 0)
        print(f"  {op:8} {size:>16} {seq['t_gemm_us'] / 1000:7.1f}ms {seq['t_comm_us'] / 1000:7.1f}ms "
              f"{label:>10} {best['speedup_vs_sequential']:7.2f}x {e:6.2f} {hidden:7.0f}%  {picture}")
        wrong = [r["wrong"] for r in results]
        checked = checked and None not in wrong
        ok = ok and all(w in (0, None) for w in wrong)
        parts = seq["t_gemm_us"] + seq["t_comm_us"]
        if seq["time_us"] > 1.25 * parts:
            waited.append(f"{op} {seq['time_us'] / parts:.1f}x")
        for r in results:
            if r["time_us"] < 0.97 * seq["t_gemm_us"] or (r["overlap_efficiency"] or 0) > 1.05:
                noisy.append(f"{r['op']} {r['label']}")
    print("  speedup: sequential's time / the algorithm's. E: the share of min(t_gemm, t_comm) hidden (1: all).")
    verdict = "Every output checked: 0 wrong" if ok and checked else "Outputs not checked (--check)" if ok else \
        "SOME OUTPUTS WERE WRONG (the tables' #wrong)"
    print(f"  hidden%: the comm time that ran beside a GEMM on the same rank. {verdict}.")
    print("  Open the pictures in a browser, and out/trace-<op>.json in https://ui.perfetto.dev.")
    caveats = []
    if load > cores:
        caveats.append(f"this machine is loaded (load average {load:.1f} on {cores} cores before the run): other "
                       "processes took turns on the cores with the ranks, so these times are not overlap figures")
    if 2 * ranks > cores:
        caveats.append(f"{ranks} ranks on {cores} cores: each rank's transfers (MPI copies, which need a core) share "
                       "a core with a GEMM, so overlap hides only what the copies leave idle; on GPUs the link is not "
                       "the SMs (docs/perf.md)")
    if waited:
        caveats.append("the sequential plan took longer than its comm and its GEMMs measured alone (" + ", ".join(waited)
                       + "): its steps waited for a core")
    if noisy:
        caveats.append("rows faster than the sequential plan's GEMMs alone, or E above 1 (" + ", ".join(noisy)
                       + "): their transfers beat the MPI collective that sequential uses, or the load changed "
                       "between the cases; those are no overlap figures")
    for c in caveats:
        print("  note: " + c + ".")
    return 0 if ok else 1


def main(argv):
    if len(argv) == 7 and argv[1] == "shape":
        shape(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), argv[6])
        return 0
    if len(argv) >= 6 and argv[1] == "summary":
        return summary(int(argv[2]), int(argv[3]), float(argv[4]), argv[5:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

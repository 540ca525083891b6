#!/usr/bin/env python3
"""host-bed-summary.py: the host transport's measurements (collmm-bench --json files of
scripts/gpu-host-bed) as one markdown table per op: per shape, t_gemm, t_comm, max(t_gemm, t_comm),
every algorithm's time over that maximum, the best overlapped algorithm and its speedup over the
baseline, the GEMMs' rate beside the comm (--gemm-rate) and the model's pred/meas where present.
The algorithms are those in the files, in collmm-bench's order; the first of a shape (collmm-bench
runs its baseline, the first of `collmm-bench --list-algos`, first) is the baseline.
Then the targets of docs/perf.md, one row per shape whose auto row sits beside its --algo all run
(collmm-bench --algo all,auto: in one run, NAME.json; or auto-NAME.json beside NAME.json; runs of
one algorithm with --pieces S, NAME-sS.json, or with --pieces S --piece-sizes halving, NAME-sSh.json,
count among the measured configurations), pass/fail each: the best within 1.05x of max(t_gemm,
t_comm) (rows with min/max >= 0.25 only), auto within 3% of the best measured, auto never more than
2% slower than the baseline (sequential, of auto's own run); where auto's configuration was also
measured as a case of its run (the same plan options, GEMM lanes included), auto is that
configuration at the mean of the two. Each time is set over the t_gemm and
t_comm of its own run (each collmm-bench run times them interleaved with its baseline); auto and the
best are compared side by side where they are of one run. A row whose GPU SM clock moved during its
runs (clocks.csv, NAME.window of scripts/gpu-host-bed) is marked and not counted. The bed's PCIe link
runs at one of two speeds (t_comm 2440 or 2760 us for one shape, switching between runs and within
one): where the row's runs' t_comm lie more than 3% apart, a check that compares across runs counts
only if it holds with the fastest link behind the better side (pass) or fails with the slowest
(FAIL); between the two it is marked "link moved".
Usage: scripts/host-bed-summary.py FILE.json... (or a folder holding them)"""
import csv
import datetime
import json
import os
import re
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


def clock_samples(folder):
    """(epoch seconds, SM MHz, watts) of clocks.csv in `folder`, or []."""
    out = []
    try:
        for row in csv.reader(open(os.path.join(folder, "clocks.csv"))):
            try:
                t = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
                out.append((t.replace(tzinfo=datetime.timezone.utc).timestamp(), float(row[1]), float(row[2])))
            except (ValueError, IndexError):
                continue
    except OSError:
        pass
    return out


def clocks_moved(folder, names, samples):
    """Whether the SM clock moved in the runs `names`: more than 10% of the window's samples taken
    while the GPU was clocked up (above half its highest clock: an idle GPU, before the first
    kernel or between runs, sits at ~345 MHz and times nothing) lie more than 3% below their median.
    A dip in one or two samples (nvidia-smi samples every 200 ms; a row's window lasts seconds) moves
    a few of the timed runs at most, which the median of the runs does not follow. None when no
    samples cover the runs."""
    clocks = []
    for name in names:
        try:
            start, end = (float(x) for x in open(os.path.join(folder, name + ".window")).read().split()[:2])
        except (OSError, ValueError):
            continue
        clocks += [c for t, c, _ in samples if start <= t <= end]
    if not clocks:
        return None
    up = sorted(c for c in clocks if c > 0.5 * max(clocks))
    median = up[len(up) // 2]
    low = sum(1 for c in up if c < 0.97 * median)
    return low > 0.1 * len(up)


def x_of(r, t_comm=None):
    """time / max(t_gemm, t_comm): the run's own figures (each collmm-bench run times its baseline's
    GEMMs and comm interleaved with it), or the given t_comm."""
    return r["time_us"] / max(r["t_gemm_us"], r["t_comm_us"] if t_comm is None else t_comm)


def judged(value, limit, strict, lenient, link_moved):
    """A verdict on value <= limit. Where the link moved between the runs compared, `strict` (the
    value with the fastest link seen behind the better side) and `lenient` (the slowest) bound it: a
    pass stands if the strict value passes, a FAIL if the lenient one fails; between them, no verdict."""
    if not link_moved:
        return value <= limit
    if strict <= limit:
        return True
    if lenient > limit:
        return False
    return None


def targets(paths):
    """The targets table: per row (NAME.json: --algo all, or all,auto), its --pieces runs (NAME-sS.json,
    NAME-sSh.json) and its auto row (in NAME.json, or alone in auto-NAME.json)."""
    runs = {}
    for path in paths:
        folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
        for name, r in rows_of([path]):
            runs.setdefault((folder, name[:-len(".json")]), []).append(r)
    print("\ntargets (x = time / max(t_gemm, t_comm) of its own run; clocks: moved where over 10% of the runs' "
          "clocked-up samples lie > 3% below their median; link: moved where the runs' t_comm lie > 3% apart)\n")
    print("| op | P | M | N | K | min/max | best | best x | auto | auto/best | auto/seq | clocks | t_comm | "
          "best <= 1.05x | auto <= 1.03 best | auto <= 1.02 seq | row |")
    print("|" + "---|" * 17)
    samples = {}
    verdicts = {"pass": 0, "FAIL": 0}
    for (folder, name), rows in sorted(runs.items()):
        if name.startswith("auto-") or re.search(r"-s\d+h?$", name) or rows[0].get("t_gemm_us") is None:
            continue
        row_runs = {name: rows}
        for (f, n), rs in runs.items():
            if f == folder and (re.fullmatch(re.escape(name) + r"-s\d+h?", n) or n == "auto-" + name):
                row_runs[n] = rs
        autos = [(n, r) for n, rs in row_runs.items() for r in rs if r["label"].startswith("auto:")]
        if not autos:
            continue
        seq = rows[0]  # the baseline: collmm-bench runs it first
        auto_run, auto = autos[0]
        measured = [(n, r) for n, rs in row_runs.items() for r in rs if r.get("t_gemm_us") and r.get("t_comm_us")]
        best_run, best = min(measured, key=lambda nr: x_of(nr[1]))
        tg, tc = seq["t_gemm_us"], seq["t_comm_us"]
        comms = [rs[0]["t_comm_us"] for rs in row_runs.values() if rs[0].get("t_comm_us")]
        fast, slow = min(comms), max(comms)
        link_moved = (slow - fast) / slow > 0.03
        if folder not in samples:
            samples[folder] = clock_samples(folder)
        moved = clocks_moved(folder, list(row_runs), samples[folder])

        def verdict(ok, applies=True):
            if not applies:
                return "-"
            if moved:
                return "clocks moved"
            if ok is None:
                return "link moved"
            verdicts["pass" if ok else "FAIL"] += 1
            return "pass" if ok else "FAIL"

        # auto against the best: side by side where both are of one run, else each over its own run's limit.
        # Where auto's configuration was also measured as a case of auto's run (all,auto: auto:ring
        # beside ring), auto stands for that configuration at the mean of its two measurements: two
        # runs of one plan differ by noise (on the bed up to 6% in one run), not by auto's choice.
        twin = [r for r in row_runs[auto_run]  # rows written before "options" existed have no twin
                if "options" in auto and r.get("options") == auto["options"] and r is not auto]
        if twin:
            auto = dict(auto, time_us=(auto["time_us"] + twin[0]["time_us"]) / 2)
        same_run = auto_run == best_run
        auto_best = auto["time_us"] / best["time_us"] if same_run else x_of(auto) / x_of(best)
        auto_best_ok = judged(auto_best, 1.03, x_of(auto, fast) / x_of(best, slow),
                              x_of(auto, slow) / x_of(best, fast), link_moved and not same_run)
        best_ok = judged(x_of(best), 1.05, x_of(best, fast), x_of(best, slow), link_moved)
        auto_seq = 1 / auto["speedup_vs_sequential"]  # against the baseline of auto's own run
        ratio = min(tg, tc) / max(tg, tc)
        cells = [seq["op"], seq["world_size"], seq["m"], seq["n"], seq["k"], f"{ratio:.2f}", best["label"],
                 f"{x_of(best):.3f}", auto["label"], f"{auto_best:.3f}", f"{auto_seq:.3f}",
                 "-" if moved is None else ("moved" if moved else "steady"),
                 f"{fast:.0f}-{slow:.0f}" + (" moved" if link_moved else ""),
                 verdict(best_ok, ratio >= 0.25), verdict(auto_best_ok), verdict(auto_seq <= 1.02), name]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(f"\ntargets: {verdicts['pass']} pass, {verdicts['FAIL']} FAIL")


def main(paths):
    shapes = {}
    for name, r in rows_of(paths):
        if name.startswith("auto-"):  # --algo auto runs: the targets table's
            continue
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
    targets(paths)


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])

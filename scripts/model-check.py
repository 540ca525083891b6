#!/usr/bin/env python3
"""model-check.py: the cost model against measured rows, with no GPU.

Every case of collmm-bench JSON files (auto's rows left out: they are a twin of a case) is predicted
again with collmm-sim, the same shape, P, dtype and plan options, and a profile (default h200-host),
then set over its measured time. Prints one line per case and, per algorithm, how many are within
15% and 10%, the median |error| and the worst.

--host run: where a file has the host's issue cost of its own run (collmm-bench writes "host_issue" on
backends that enqueue their steps: cuda), the profile gets that host term for its cases: the lease's
host, fitted on the same cases (issue_us per case, the host wall time of its enqueue). Each case's line
then also shows issue/meas: near 1, the row is the host's, not the device's.

Usage: scripts/model-check.py [--sim build/tools/sim/collmm-sim] [--profile h200-host] [--host none|run] [--quiet]
       FILE.json...
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def predict(sim, profile, r, world):
    o = r["options"]
    args = [sim, "--op", r["op"], "--algo", o["algo"], "-m", str(r["m"]), "-n", str(r["n"]), "-k", str(r["k"]),
            "-P", str(world), "--dtype", r["dtype"], "--profile", profile, "--stages", str(o["stages"]),
            "--gemm-lanes", str(o["gemm_lanes"]), "--merge", str(o["merge"]), "--pieces", str(o["pieces"]),
            "--piece-sizes", o["piece_sizes"], "--post", o["post"]]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.json")
        subprocess.run(args + ["--json", out], check=True, stdout=subprocess.DEVNULL)
        rows = json.load(open(out))
    rows = rows["results"] if isinstance(rows, dict) else rows
    return rows[0]["time_us"]


def saved_profile(sim, profile, tmp):
    """The profile `profile` as collmm-sim writes it (JSON)."""
    path = os.path.join(tmp, "base.json")
    subprocess.run([sim, "--profile", profile, "--save-profile", path], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(path))


def profile_with_host(base, host, tmp):
    """A profile JSON file: `base` with a run's fitted host issue cost."""
    p = dict(base, name=base.get("name", "profile") + "+run-host")
    p["host"] = {"issue_us": host["issue_us"], "gemm_issue_us": host["gemm_issue_us"],
                 "shared": bool(host.get("shared", False))}
    path = os.path.join(tmp, "profile.json")
    json.dump(p, open(path, "w"))
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="build/tools/sim/collmm-sim")
    ap.add_argument("--profile", default="h200-host")
    ap.add_argument("--host", choices=["none", "run"], default="none",
                    help="run: add each file's own host issue cost (its \"host_issue\") to the profile")
    ap.add_argument("--quiet", action="store_true", help="the summary only")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if not os.access(a.sim, os.X_OK):
        sys.exit(f"model-check: no collmm-sim at {a.sim} (build it: cmake --build build --target collmm-sim; or --sim PATH)")
    by_algo = {}
    tmp = tempfile.TemporaryDirectory()
    base = saved_profile(a.sim, a.profile, tmp.name) if a.host == "run" else None
    for f in a.files:
        try:
            d = json.load(open(f))
            results, world = d["results"], d["world_size"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"model-check: {f}: not a collmm-bench JSON file ({type(e).__name__}: {e})")
        profile = a.profile
        if a.host == "run" and d.get("host_issue"):
            h = d["host_issue"]
            profile = profile_with_host(base, h, tmp.name)
            print(f"# {f}: host issue {h['issue_us']:.2f} us per operation, {h['gemm_issue_us']:.2f} per GEMM "
                  f"(fitted on its {h['cases']} cases)")
        elif a.host == "run":
            print(f"# {f}: no host issue times (a backend that does not enqueue its steps, or an older file)")
        for r in results:
            if r["algo"] == "auto" or r.get("label", "").startswith("auto") or not r.get("time_us"):
                continue  # auto's rows are twins of a case; a case without a time (NaN) has nothing to compare
            pred = predict(a.sim, profile, r, world)
            ratio = pred / r["time_us"]
            label = r.get("label", r["algo"])
            if not a.quiet:
                host = f"  issue/meas {r['issue_us'] / r['time_us']:5.2f}" if r.get("issue_us") else ""
                print(f"{r['op']:8} P{d['world_size']} M{r['m']:<6} N{r['n']:<6} K{r['k']:<6} {label:24} "
                      f"meas {r['time_us']:9.1f} pred {pred:9.1f} {ratio:6.3f}{'  MISS' if abs(ratio - 1) > 0.15 else ''}"
                      f"{host}")
            by_algo.setdefault(r["algo"], []).append(ratio)
    with_host = " with each run's host issue cost" if a.host == "run" else ""
    print(f"# profile {a.profile}{with_host}: pred/meas per algorithm")
    tmp.cleanup()
    every = []
    for algo, ratios in sorted(by_algo.items()):
        every += ratios
        errs = [abs(x - 1) for x in ratios]
        worst = max(ratios, key=lambda x: abs(x - 1))
        print(f"{algo:10} {sum(e <= 0.15 for e in errs):3} / {len(errs):3} within 15%  "
              f"{sum(e <= 0.10 for e in errs):3} within 10%  median |err| {100 * statistics.median(errs):4.1f}%  "
              f"worst {worst:.3f}")
    errs = [abs(x - 1) for x in every]
    print(f"{'all':10} {sum(e <= 0.15 for e in errs):3} / {len(errs):3} within 15%  "
          f"{sum(e <= 0.10 for e in errs):3} within 10%  median |err| {100 * statistics.median(errs):4.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

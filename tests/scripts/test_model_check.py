"""scripts/model-check.py on a synthetic collmm-bench JSON: each case predicted again by collmm-sim
with its own options, set over its measured time; auto's rows left out; the summary's counts.

    python3 test_model_check.py path/to/model-check.py path/to/collmm-sim"""
import json
import os
import subprocess
import sys
import tempfile

CHECK, SIM = sys.argv[1], sys.argv[2]


def case(algo, label, time_us, pieces=1, sizes="equal"):
    options = {"algo": algo, "stages": 0, "post": "comm-first", "gemm_lanes": 1, "merge": 1, "pieces": pieces,
               "piece_sizes": sizes}
    return {"op": "gemm_rs", "m": 512, "n": 4096, "k": 14336, "dtype": "bf16", "algo": algo, "label": label,
            "options": options, "time_us": time_us}


def predicted(algo, pieces=1):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.json")
        subprocess.run([SIM, "--op", "gemm_rs", "--algo", algo, "-m", "512", "-n", "4096", "-k", "14336", "-P", "4",
                        "--dtype", "bf16", "--profile", "h200-host", "--pieces", str(pieces), "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        return json.load(open(out))["results"][0]["time_us"]


ring, bidir = predicted("ring"), predicted("bidir")
pieces2 = predicted("ring", 2)
assert pieces2 != ring, "the pieces option must reach collmm-sim"
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "row.json")
    json.dump({"world_size": 4, "results": [case("ring", "ring", ring / 1.10),
                                            case("ring", "ring:pieces2", pieces2 / 0.95, pieces=2),
                                            case("bidir", "bidir", bidir / 1.30),
                                            case("auto", "auto:ring", 1.0)]}, open(path, "w"))
    out = subprocess.run([sys.executable, CHECK, "--sim", SIM, path], check=True, capture_output=True,
                         text=True).stdout
print(out)
lines = {line.split()[5]: line for line in out.splitlines() if line.startswith("gemm_rs")}
assert set(lines) == {"ring", "ring:pieces2", "bidir"}, lines  # auto's row left out
assert lines["ring"].split()[-1] == "1.100", lines["ring"]
assert lines["ring:pieces2"].split()[-1] == "0.950", lines["ring:pieces2"]
assert lines["bidir"].split()[-2:] == ["1.300", "MISS"], lines["bidir"]
assert "ring         2 /   2 within 15%" in out and "bidir        0 /   1 within 15%" in out, out
assert "all          2 /   3 within 15%" in out, out
# --host run: a file with its run's host issue cost (cuda's "host_issue") is predicted with that host
# term on top of the profile: slower at this small M, where the host's issue paces the device; the
# issue/meas column shows each case's share. Without --host, or for a file without it, as before.
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "row.json")
    row = case("ring", "ring", ring)
    row["issue_us"], row["issue_ops"] = 0.9 * ring, {"gemms": 4, "others": 6}
    json.dump({"world_size": 4, "host_issue": {"issue_us": 3.0, "gemm_issue_us": 30.0, "cases": 1},
               "results": [row]}, open(path, "w"))
    plain = subprocess.run([sys.executable, CHECK, "--sim", SIM, path], check=True, capture_output=True,
                           text=True).stdout
    hosted = subprocess.run([sys.executable, CHECK, "--sim", SIM, "--host", "run", path], check=True,
                            capture_output=True, text=True).stdout
print(hosted)
line = [x for x in hosted.splitlines() if x.startswith("gemm_rs")][0]
assert "host issue 3.00 us per operation, 30.00 per GEMM (fitted on its 1 cases)" in hosted, hosted
def ratio_of(line):
    words = line.split()
    return float(words[words.index("pred") + 2])


assert line.split()[-2:] == ["issue/meas", "0.90"], line
assert ratio_of(line) > 1.0, line  # the host term makes the prediction slower than measured
assert ratio_of([x for x in plain.splitlines() if x.startswith("gemm_rs")][0]) == 1.0, plain
# A file that is not a collmm-bench JSON: a clear message and exit 1, no traceback.
with tempfile.TemporaryDirectory() as tmp:
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write("{}")
    r = subprocess.run([sys.executable, CHECK, "--sim", SIM, bad], capture_output=True, text=True)
    assert r.returncode == 1 and "not a collmm-bench JSON file" in r.stderr and "Traceback" not in r.stderr, r
print("model-check: ok")

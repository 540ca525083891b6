#!/usr/bin/env python3
"""link-probe.py: is the host bed's link speed a property of the pinned buffer (where its pages
lie: the NUMA node behind the PCIe root) or of the moment? Allocates a fresh pinned host buffer
ALLOCS times and times host->device and device->host copies of it (CUDA events, median of 5 after
one warm-up), then copies of the first buffer again at the end. Bimodal speeds that follow the
buffer and repeat when it is reused point at placement; speeds that change with time alone at the
link. Prints the machine's NUMA layout first. Usage: link-probe.py [MiB=256] [ALLOCS=10]"""
import statistics
import subprocess
import sys

import torch

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
allocs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
for cmd in (["lscpu"], ["numactl", "-H"], ["nvidia-smi", "topo", "-m"]):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
        print(f"$ {' '.join(cmd)}\n" + "\n".join(l for l in out.splitlines() if cmd[0] != "lscpu" or "NUMA" in l
                                                 or "Model name" in l or "Socket" in l))
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"$ {' '.join(cmd)}: {e}")
dev = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")


def gbps(host, to_device):
    times = []
    for i in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        (dev.copy_(host, non_blocking=True) if to_device else host.copy_(dev, non_blocking=True))
        end.record()
        end.synchronize()
        if i:
            times.append(start.elapsed_time(end))
    return (mib / 1024) / (statistics.median(times) / 1e3)


buffers = []
print(f"\n{mib} MiB copies, GB/s (GiB/s): alloc, h2d, d2h")
for a in range(allocs):
    host = torch.empty(mib << 20, dtype=torch.uint8, pin_memory=True)
    host.fill_(a)
    buffers.append(host)
    print(f"alloc {a}: {gbps(host, True):6.2f} {gbps(host, False):6.2f}", flush=True)
for a in range(min(3, allocs)):
    print(f"alloc {a} again: {gbps(buffers[a], True):6.2f} {gbps(buffers[a], False):6.2f}", flush=True)

"""gemm_vs_torch.py: the collmm GEMM engine (libcollmm_gemm_c.so, through ctypes) against
torch.matmul, side by side in one process: bf16, row-major, same tensors, same stream, random
data in +-[0.1, 1]. Each round times one torch.matmul and one engine GEMM (heuristic, then timed
algorithm choice) with CUDA events; medians over the rounds after warm-up. Also checks that the
engine's C matches torch's. Usage: python3 gemm_vs_torch.py LIB.so CSV [ROUNDS]"""
import ctypes, sys
import torch

lib = ctypes.CDLL(sys.argv[1])
lib.collmm_gemm_new.restype = ctypes.c_void_p
lib.collmm_gemm_error.restype = ctypes.c_char_p
lib.collmm_gemm_bf16.argtypes = [ctypes.c_void_p] + [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 4
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
out = open(sys.argv[2], "w")
out.write("M,N,K,torch_ms,heur_ms,timed_ms,torch_tflops,heur_tflops,timed_tflops,heur_x_torch,timed_x_torch\n")

def rnd(r, c):
    x = torch.rand(r, c, device="cuda") * 0.9 + 0.1
    return (x * (torch.randint(0, 2, (r, c), device="cuda") * 2 - 1)).to(torch.bfloat16)

engines = {name: lib.collmm_gemm_new(0, timed) for name, timed in (("heur", 0), ("timed", 1))}
for e in engines.values():
    if not e: sys.exit("collmm_gemm_new: " + lib.collmm_gemm_error().decode())
stream = torch.cuda.current_stream()
N = K = 8192
a, b = rnd(8192, K), rnd(K, N)
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; {rounds} interleaved rounds after 5 warm-up rounds")
print(f"{'M':>6} {'N':>6} {'K':>6} {'torch TF/s':>11} {'heur TF/s':>10} {'x torch':>8} {'timed TF/s':>11} {'x torch':>8} {'max|diff|/max|C|':>17}")
for m in (8192, 4096, 2048, 1024):
    am, c_t = a[:m], torch.empty(m, N, device="cuda", dtype=torch.bfloat16)
    c_e = torch.empty_like(c_t)
    def engine(name):
        if lib.collmm_gemm_bf16(engines[name], m, N, K, am.data_ptr(), b.data_ptr(), c_e.data_ptr(), stream.cuda_stream):
            sys.exit("collmm_gemm_bf16: " + lib.collmm_gemm_error().decode())
    fns = {"torch": lambda: torch.matmul(am, b, out=c_t), "heur": lambda: engine("heur"), "timed": lambda: engine("timed")}
    times = {k: [] for k in fns}
    for r in range(rounds + 5):
        for k, f in fns.items():
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); f(); e1.record(); e1.synchronize()
            if r >= 5: times[k].append(e0.elapsed_time(e1))
    ms = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    tf = {k: 2 * m * N * K / v / 1e9 for k, v in ms.items()}
    engine("heur"); torch.cuda.synchronize()
    diff = ((c_e.float() - c_t.float()).abs().max() / c_t.float().abs().max()).item()
    print(f"{m:>6} {N:>6} {K:>6} {tf['torch']:>11.1f} {tf['heur']:>10.1f} {tf['heur'] / tf['torch']:>8.3f} "
          f"{tf['timed']:>11.1f} {tf['timed'] / tf['torch']:>8.3f} {diff:>17.2e}")
    out.write(f"{m},{N},{K},{ms['torch']:.5f},{ms['heur']:.5f},{ms['timed']:.5f},{tf['torch']:.1f},{tf['heur']:.1f},"
              f"{tf['timed']:.1f},{tf['heur'] / tf['torch']:.4f},{tf['timed'] / tf['torch']:.4f}\n")
    if not diff < 2e-2: sys.exit(f"engine and torch disagree at M={m}: {diff}")

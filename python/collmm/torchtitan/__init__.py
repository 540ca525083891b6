"""collmm inside torchtitan 0.3.0 (``pip install collmm[torchtitan]``): its tensor-parallel
projections run collmm's collective matmuls, switched on with one flag:

    torchrun --nproc_per_node 2 -m torchtitan.train --module collmm.torchtitan \
        --config llama3_debugmodel_collmm --parallelism.tensor_parallel_degree 2

- linear.py: plain-tensor autograd Functions with the signatures of torchtitan's
  (torchtitan/distributed/linear.py): AllGatherLinear, AllGatherLinearMulti, LinearReduceScatter,
  and LinearAllReduce for the layers without sequence parallelism.
- modules.py: subclasses of torchtitan's fused modules (models/common/dist_gemm.py) and their
  Configs: FusedQKV, SeparateQKV, RowParallelLinear, FeedForward, AllReduceLinear.
- sequence.py: the embedding's scatter and the last norm's gather of the sequence, any length.
- convert.py: the ModelConfigConverter and the llama3 root config.
- trainer.py: torchtitan's Trainer with collmm's sequence split and trace of a step.
- config_registry.py: the configs that ``--module collmm.torchtitan --config ...`` loads.

Beyond torchtitan's own dist_gemm: any seq_len at any TP degree, a bias on w1/w3 (and q/k/v), and
separate or fused QKV. Also the layers without sequence parallelism (GEMM + all-reduce), CPU (gloo)
as well as CUDA, no workspace shared between calls, and collmm's trace. Requires torchtitan 0.3.0,
whose layers get [B, S_r, D] activations (later versions flatten them).
"""
import torchtitan as _torchtitan

SUPPORTED_VERSION = "0.3.0"
if getattr(_torchtitan, "__version__", SUPPORTED_VERSION) != SUPPORTED_VERSION:
    raise ImportError(f"collmm.torchtitan supports torchtitan {SUPPORTED_VERSION}, found "
                      f"{_torchtitan.__version__}: pip install torchtitan=={SUPPORTED_VERSION}")

from .linear import AllGatherLinear, AllGatherLinearMulti, LinearAllReduce, LinearReduceScatter  # noqa: E402
from .convert import Converter, Llama3Config  # noqa: E402

__all__ = ["AllGatherLinear", "AllGatherLinearMulti", "Converter", "LinearAllReduce", "LinearReduceScatter",
           "Llama3Config", "SUPPORTED_VERSION"]

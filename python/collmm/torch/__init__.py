"""collmm.torch: the tensor-parallel layers, ParallelStyles and state-dict helpers of
collmm/tensor_parallel.py, under the name that code imports them by (``from collmm.torch import
ColwiseParallel``). Their module has a name of its own, and the package imports torch as _torch, so
that importing collmm.torch rebinds no name the package uses."""
from ..tensor_parallel import *  # noqa: F401,F403
from ..tensor_parallel import __all__  # noqa: F401

"""collmm.trace's labels for the backward of autograd Functions written in Python.

The ops' own autograd labels its backward's calls "<module> backward". A Python Function whose
backward calls the ops directly does the same with these two: `remember_module(ctx)` in its
forward, `with backward_of(ctx):` around its backward's calls. Under torch.compile they do nothing.
"""
import contextlib

import torch


def remember_module(ctx) -> None:
    """In a Function's forward: keep the module whose forward runs now (None where no trace runs)."""
    ctx.traced_module = None if torch.compiler.is_compiling() else torch.ops.collmm.trace_forward_module()


@contextlib.contextmanager
def backward_of(ctx):
    """Around a Function's backward: its collmm calls are labelled "<module> backward"."""
    module = getattr(ctx, "traced_module", None)
    if module is None:
        yield
        return
    torch.ops.collmm.trace_backward_begin(module)
    try:
        yield
    finally:
        torch.ops.collmm.trace_backward_end()

"""The config registry of ``--module collmm.torchtitan``: torchtitan 0.3.0's llama3 configs with
collmm's tensor-parallel layers (collmm.torchtitan.convert) and collmm's Trainer.

    torchrun --nproc_per_node 2 -m torchtitan.train --module collmm.torchtitan \
        --config llama3_debugmodel_collmm --parallelism.tensor_parallel_degree 2

Each function is torchtitan's of the same name without ``_collmm`` (models/llama3/config_registry.py),
its model built by ``model_registry(flavor, converters=[Converter.Config()])``, the SPMD backend
spmd_types (the one whose layers get plain local tensors).
"""
from torchtitan.models.llama3 import config_registry as llama3
from torchtitan.models.llama3 import model_registry

from .convert import Converter
from .modules import retype
from .trainer import Trainer


def with_collmm(config, flavor: str, **model_args) -> Trainer.Config:
    """torchtitan's trainer `config` for llama3 `flavor`, its model converted to collmm's layers.
    `model_args`: model_registry's other arguments (attn_backend)."""
    config = retype(config, Trainer.Config)
    config.model_spec = model_registry(flavor, converters=[Converter.Config()], **model_args)
    config.parallelism.spmd_backend = "spmd_types"
    return config


def llama3_debugmodel_collmm() -> Trainer.Config:
    return with_collmm(llama3.llama3_debugmodel(), "debugmodel")


def llama3_8b_collmm() -> Trainer.Config:
    return with_collmm(llama3.llama3_8b(), "8B")


def llama3_70b_collmm() -> Trainer.Config:
    return with_collmm(llama3.llama3_70b(), "70B")


__all__ = ["llama3_70b_collmm", "llama3_8b_collmm", "llama3_debugmodel_collmm", "with_collmm"]

"""The model-config converter that puts collmm's modules into a torchtitan 0.3.0 decoder, and
the llama3 root config that adapts torchtitan's sharding setup to them.

``Converter`` (a ModelConfigConverter, for ``model_registry(..., converters=[Converter.Config()])``)
re-types each layer's configs: a fused wqkv -> FusedQKV, separate wq/wk/wv -> SeparateQKV, wo ->
RowParallelLinear, the SwiGLU FFN -> FeedForward (collmm.torchtitan.modules). Parameters keep
their stock shapes, initialisation and checkpoint names. A llama3 root config becomes
``Llama3Config``, whose ``update_from_config`` runs torchtitan's sharding setup and then:

- with sequence parallelism (SP): the embedding scatters and the last norm gathers the sequence
  by collmm's split (collmm.torchtitan.sequence), so any seq_len runs at any TP degree;
- without SP (which torchtitan's dist_gemm refuses): the projections go back to torchtitan's
  stock ones, except wo and w2, which become AllReduceLinear (collmm's GEMM + all-reduce).

Whether the model runs SP is ``Llama3Config.sequence_parallel``; collmm's Trainer sets it from
``parallelism.enable_sequence_parallel`` (None: read that flag here).
"""
from dataclasses import dataclass

from torchtitan.models.common.dist_gemm import AllGatherFusedFeedForward
from torchtitan.models.common.attention import FusedQKVLinear, GQAttention, QKVLinear
from torchtitan.models.common.embedding import Embedding
from torchtitan.models.common.feed_forward import FeedForward as StockFeedForward
from torchtitan.models.common.nn_modules import RMSNorm
from torchtitan.models.llama3.model import Llama3Model
from torchtitan.protocols.model import ModelConfigConverter
from torchtitan.protocols.sharding import ShardingConfig

from .modules import AllReduceLinear, FeedForward, FusedQKV, RowParallelLinear, SeparateQKV, retype
from .sequence import SequenceGatherNorm, SequenceScatterEmbedding


def _fused_layer(attention, feed_forward):
    """The layer's (attention, feed_forward) configs re-typed to collmm's SP modules."""
    if not isinstance(attention, GQAttention.Config):
        raise ValueError(f"collmm.torchtitan: attention {type(attention).__name__} is not a GQAttention: "
                         "collmm's modules replace GQAttention's projections only")
    qkv = attention.qkv_linear
    if isinstance(qkv, FusedQKVLinear.Config):
        attention.qkv_linear = retype(qkv, FusedQKV.Config)
    elif isinstance(qkv, QKVLinear.Config):
        attention.qkv_linear = retype(qkv, SeparateQKV.Config)
    else:
        raise ValueError(f"collmm.torchtitan: unknown QKV projection {type(qkv).__name__}")
    attention.wo = retype(attention.wo, RowParallelLinear.Config)
    if feed_forward is not None:
        if type(feed_forward) not in (StockFeedForward.Config, AllGatherFusedFeedForward.Config, FeedForward.Config):
            raise ValueError(f"collmm.torchtitan: unknown feed-forward {type(feed_forward).__name__}")
        feed_forward = retype(feed_forward, FeedForward.Config)
    return attention, feed_forward


def _unfused_layer(attention, feed_forward):
    """Without SP: torchtitan's stock projections, wo and w2 collmm's GEMM + all-reduce."""
    qkv = attention.qkv_linear
    attention.qkv_linear = retype(qkv, FusedQKVLinear.Config if isinstance(qkv, FusedQKVLinear.Config)
                                  else QKVLinear.Config)
    attention.wo = retype(attention.wo, AllReduceLinear.Config)
    if feed_forward is not None:
        feed_forward = retype(feed_forward, StockFeedForward.Config)
        feed_forward.w2 = retype(feed_forward.w2, AllReduceLinear.Config)
    return attention, feed_forward


def _state_only(linear) -> None:
    """wo / w2 of collmm's: the output is already in its final layout, so only the parameters'
    sharding stays declared (as torchtitan does for its own dist_gemm)."""
    linear.sharding_config = ShardingConfig(state_shardings=linear.sharding_config.state_shardings)


@dataclass(kw_only=True, slots=True)
class Llama3Config(Llama3Model.Config):
    """torchtitan's Llama3Model.Config (it builds a Llama3Model) with collmm's layers."""

    sequence_parallel: bool | None = None
    """Whether the model runs sequence-parallel; None: parallelism.enable_sequence_parallel."""

    def update_from_config(self, *, config, **kwargs) -> None:
        parallelism = config.parallelism
        sp = parallelism.enable_sequence_parallel if self.sequence_parallel is None else self.sequence_parallel
        if parallelism.context_parallel_degree > 1:
            raise ValueError("collmm.torchtitan: context parallelism is not supported with collmm's layers")
        for layer in self.layers:
            if isinstance(layer.attention.wo, (RowParallelLinear.Config, AllReduceLinear.Config)):
                pick = _fused_layer if sp else _unfused_layer
                layer.attention, layer.feed_forward = pick(layer.attention, layer.feed_forward)
        if sp:
            self.tok_embeddings = retype(self.tok_embeddings, SequenceScatterEmbedding.Config)
            self.norm = retype(self.norm, SequenceGatherNorm.Config)
        else:
            self.tok_embeddings = retype(self.tok_embeddings, Embedding.Config)
            self.norm = retype(self.norm, RMSNorm.Config)
        flag = parallelism.enable_sequence_parallel
        parallelism.enable_sequence_parallel = sp  # torchtitan's sharding setup reads the flag
        try:
            Llama3Model.Config.update_from_config(self, config=config, **kwargs)
        finally:
            parallelism.enable_sequence_parallel = flag
        if not sp:
            for layer in self.layers:
                if isinstance(layer.attention.wo, AllReduceLinear.Config):
                    _state_only(layer.attention.wo)
                if layer.feed_forward is not None and isinstance(layer.feed_forward.w2, AllReduceLinear.Config):
                    _state_only(layer.feed_forward.w2)


class Converter(ModelConfigConverter):
    """Re-types a torchtitan decoder config's tensor-parallel projections to collmm's modules (and
    a llama3 root config to Llama3Config). ``model_registry(flavor, converters=[Converter.Config()])``."""

    @dataclass(kw_only=True, slots=True)
    class Config(ModelConfigConverter.Config):
        pass

    def __init__(self, config: Config):
        self.config = config

    def convert(self, model_config):
        for layer in model_config.layers:
            layer.attention, layer.feed_forward = _fused_layer(layer.attention, layer.feed_forward)
        if isinstance(model_config, Llama3Model.Config) and not isinstance(model_config, Llama3Config):
            model_config = retype(model_config, Llama3Config)
        return model_config


__all__ = ["Converter", "Llama3Config"]

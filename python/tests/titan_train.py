"""Test-only launcher: torchtitan 0.3.0's trainer on CPU (gloo), run under torchrun, writing the
losses of every step to a JSON file (rank 0).

    python -m torch.distributed.run --standalone --nproc_per_node 2 titan_train.py OUT.json [--cuda] \
        --module collmm.torchtitan --config llama3_debugmodel_collmm [torchtitan's flags]

With --cuda the device is left as torchtitan picks it (one GPU per rank); the rest is the same.

What it changes in torchtitan, for a machine without a GPU and without torchtitan's test assets:
- the device: torchtitan falls back to "cuda" without an accelerator; here "cpu" (gloo), and
  the memory monitor reports zeros (it reads CUDA's allocator), the groups keep their timeouts
  (torchtitan shortens them behind a barrier on a CUDA device id);
- attention: FlexAttention has no CPU backward; here SDPA, causal (no per-document masks);
- the data: a seeded stream of random tokens (the same on every run and rank) and a tokenizer that
  only knows the vocabulary's size, since torchtitan's wheel ships no c4_test or tokenizer.
Data parallelism stays off (dp_shard 1): torchtitan's FSDP over gloo fails ("Cannot use
ReduceOp.PREMUL_SUM with Gloo").
"""
import json
import sys
from dataclasses import dataclass

import torch
import torch._utils

CUDA = "--cuda" in sys.argv[2:]  # on the GPUs, as torchtitan runs
if not CUDA:
    torch._utils._get_available_device_type = lambda: "cpu"  # before torchtitan reads it at import

    import torchtitan.tools.utils as titan_utils  # noqa: E402

    titan_utils.get_local_device = lambda: torch.device("cpu")

    import torchtitan.components.metrics as titan_metrics  # noqa: E402

    class HostMemoryMonitor:
        """torchtitan's DeviceMemoryMonitor reads CUDA's allocator; the host has none to read."""

        device_name, device_capacity_gib = "cpu", 0.0

        def get_peak_stats(self):
            return titan_metrics.DeviceMemStats(0.0, 0.0, 0.0, 0.0, 0, 0)

        def reset_peak_stats(self):
            pass

    titan_metrics.build_device_memory_monitor = HostMemoryMonitor

    import torchtitan.distributed.utils as titan_dist  # noqa: E402

    # After step 1 torchtitan shortens the groups' timeouts behind a barrier on a CUDA device id.
    titan_dist.set_pg_timeouts = lambda timeout, parallel_dims: None

import torch.distributed as dist  # noqa: E402
from torchtitan.components.dataloader import BaseDataLoader  # noqa: E402
from torchtitan.components.tokenizer import BaseTokenizer  # noqa: E402
from torchtitan.config import ConfigManager  # noqa: E402
from torchtitan.models.common.attention import ScaledDotProductAttention  # noqa: E402

VOCAB = 2048  # the llama3 debug model's


class RandomTokens(BaseDataLoader):
    """Batches of random tokens, the same for a given (step, rank of the batch) on every run."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        pass

    def __init__(self, config, *, dp_world_size, dp_rank, tokenizer, seq_len, local_batch_size, **_):
        self.seq_len, self.batch, self.dp_rank, self.step = seq_len, local_batch_size, dp_rank, 0

    def __iter__(self):
        while True:
            self.step += 1
            g = torch.Generator().manual_seed(1000 * self.step + self.dp_rank)
            tokens = torch.randint(0, VOCAB, (self.batch, self.seq_len + 1), generator=g)
            yield {"input": tokens[:, :-1]}, tokens[:, 1:]

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = state["step"]


class SizeOnlyTokenizer(BaseTokenizer):
    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        pass

    def __init__(self, config, **_):
        super().__init__()

    def encode(self, *args, **kwargs):
        raise NotImplementedError("the test data is tokens already")

    def decode(self, *args, **kwargs):
        raise NotImplementedError("the test data is tokens already")

    def get_vocab_size(self):
        return VOCAB


def main():
    out, args = sys.argv[1], [a for a in sys.argv[2:] if a != "--cuda"]
    config = ConfigManager().parse_args(args)
    for layer in config.model_spec.model.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    config.dataloader = RandomTokens.Config()
    config.tokenizer = SizeOnlyTokenizer.Config()
    config.validator.enable = False
    config.checkpoint.enable = False
    config.compile.enable = False
    config.training.disable_cuda_graphs = True
    config.metrics.log_freq = 1
    trainer = config.build()
    losses = []
    log = trainer.metrics_processor.log

    def record(step, loss, max_loss, grad_norm, **kwargs):
        losses.append({"step": step, "loss": loss, "grad_norm": grad_norm})
        return log(step, loss, max_loss, grad_norm, **kwargs)

    trainer.metrics_processor.log = record
    try:
        trainer.train()
    finally:
        trainer.close()
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump({"losses": losses, "model": type(config.model_spec.model).__name__,
                       "wo": type(trainer.model_parts[0].layers["0"].attention.wo).__name__}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

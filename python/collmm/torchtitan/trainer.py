"""collmm's Trainer: torchtitan 0.3.0's, with collmm's sequence split and its trace of a step.

torchtitan's Trainer refuses a seq_len that the TP degree does not divide when sequence
parallelism is on, because its own split is even. A model converted by collmm.torchtitan splits
the sequence as collmm's layers do (any S % TP): this Trainer hands the model the SP setting
(Llama3Config.sequence_parallel) and keeps torchtitan's check away from that case alone.

``--collmm.trace_step N`` records step N with ``collmm.trace`` (every collmm call of the forward
and backward, labelled by module). On global rank 0 it writes DUMP_FOLDER/collmm_trace/step<N>.json
(Chrome trace), .txt (one row per call: op, algo, M N K, time, hidden%) and an SVG per call.
"""
import os
from dataclasses import dataclass, field

import torchtitan.trainer

from .. import trace
from .convert import Llama3Config


@dataclass(kw_only=True, slots=True)
class CollmmOptions:
    trace_step: int = 0
    """Record this training step with collmm.trace (0: none)."""


class Trainer(torchtitan.trainer.Trainer):
    """torchtitan's Trainer for models converted by collmm.torchtitan (see the module's doc)."""

    @dataclass(kw_only=True, slots=True)
    class Config(torchtitan.trainer.Trainer.Config):
        collmm: CollmmOptions = field(default_factory=CollmmOptions)

    def __init__(self, config: Config):
        parallelism = config.parallelism
        model = config.model_spec.model if config.model_spec is not None else None
        flag = parallelism.enable_sequence_parallel
        uneven = config.training.seq_len % max(parallelism.tensor_parallel_degree, 1) != 0
        if isinstance(model, Llama3Config):
            if model.sequence_parallel is None:
                model.sequence_parallel = flag
            if model.sequence_parallel and uneven:
                # torchtitan checks seq_len % TP for its own even split; collmm's split takes any.
                parallelism.enable_sequence_parallel = False
        try:
            torchtitan.trainer.Trainer.__init__(self, config)
        finally:
            parallelism.enable_sequence_parallel = flag

    def train_step(self, data_iterator):
        step = self.config.collmm.trace_step
        if step <= 0 or self.step != step:
            return torchtitan.trainer.Trainer.train_step(self, data_iterator)
        path = os.path.join(self.config.dump_folder, "collmm_trace", f"step{step}")
        with trace(path, self.model_parts[0]):
            return torchtitan.trainer.Trainer.train_step(self, data_iterator)


__all__ = ["CollmmOptions", "Trainer"]

"""Callbacks for training frameworks, imported lazily: neither framework is a dependency.

Hugging Face `Trainer`: `trainer.add_callback(m.hf_callback())` — a step is an optimizer step
(`on_step_begin` … `on_step_end`, transformers' TrainerCallback). PyTorch Lightning:
`Trainer(callbacks=[m.lightning_callback()])` — a step is a training batch
(`on_train_batch_start` … `on_train_batch_end`, lightning's Callback). In both, the time between
one step's end and the next step's start — where the framework fetches the next batch — counts as
data wait. Tokens per step come from the framework where it counts them (transformers'
`state.num_input_tokens_seen`, with `include_num_input_tokens_seen=True`), else from
`tokens_per_step`, else from the batch's `input_ids` shape.
"""

from __future__ import annotations

from typing import Any

from trainrig.errors import TrainrigError

__all__ = ["hf_callback", "lightning_callback", "StepHooks", "batch_tokens"]


class StepHooks:
    """The framework-neutral part: begin / end a step on a monitor, counting tokens."""

    def __init__(self, monitor: Any, tokens_per_step: int | None = None) -> None:
        self.monitor = monitor
        self.tokens_per_step = tokens_per_step
        self._seen: int | None = None

    def begin(self) -> None:
        self.monitor.begin_step()

    def end(self, tokens: int | None = None) -> None:
        self.monitor.step(tokens if tokens is not None else self.tokens_per_step)

    def tokens_from_counter(self, seen: Any) -> int | None:
        """Tokens since the last call from a cumulative counter (None until it moves)."""
        if not isinstance(seen, int) or seen <= 0:
            return None
        before, self._seen = self._seen, seen
        return seen - before if before is not None and seen >= before else None


def batch_tokens(batch: Any) -> int | None:
    """Tokens in a batch holding `input_ids` (a mapping or attribute) shaped (batch, seq)."""
    ids = batch.get("input_ids") if isinstance(batch, dict) else getattr(batch, "input_ids", None)
    shape = getattr(ids, "shape", None)
    if shape is None or len(shape) < 2:
        return None
    return int(shape[0]) * int(shape[1])


def hf_callback(monitor: Any, tokens_per_step: int | None = None) -> Any:
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise TrainrigError("hf_callback", "needs the transformers package (pip install "
                                           "transformers).") from None
    hooks = StepHooks(monitor, tokens_per_step)

    class TrainrigCallback(TrainerCallback):
        """Records each optimizer step of a Hugging Face Trainer into a trainrig monitor."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            hooks.begin()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            hooks.end(hooks.tokens_from_counter(getattr(state, "num_input_tokens_seen", None)))

    return TrainrigCallback()


def lightning_callback(monitor: Any, tokens_per_step: int | None = None) -> Any:
    base = _lightning_base()
    hooks = StepHooks(monitor, tokens_per_step)

    class TrainrigCallback(base):  # type: ignore[misc, valid-type]
        """Records each training batch of a Lightning Trainer into a trainrig monitor."""

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                 *args: Any) -> None:
            hooks.begin()

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                               batch_idx: int, *args: Any) -> None:
            hooks.end(None if tokens_per_step is not None else batch_tokens(batch))

    return TrainrigCallback()


def _lightning_base() -> Any:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError:
            raise TrainrigError("lightning_callback", "needs lightning (pip install lightning) or "
                                                      "pytorch-lightning.") from None
    return Callback

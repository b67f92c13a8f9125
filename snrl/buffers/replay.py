"""Experience replay, composed from three independent choices:

- **storage**: :class:`~snrl.buffers.storage.RingStorage`, preallocated numpy fields in a ring;
- **writer**: how env steps become stored items, :class:`~snrl.buffers.nstep.NStepWriter`
  (n-step transitions, flushed per env at episode ends) or
  :class:`~snrl.buffers.sequence.SequenceWriter` (R2D2 windows with the stored recurrent
  state and burn-in);
- **sampler**: which items a batch draws, :class:`~snrl.buffers.samplers.UniformSampler` or
  :class:`~snrl.buffers.samplers.PrioritizedSampler` (sum tree, importance weights).

::

    buf = ReplayBuffer(100_000, NStepWriter((4,), n_envs=8, n_step=3, gamma=0.99),
                       PrioritizedSampler(alpha=0.6, beta0=0.4, seed=0))
    buf.add(obs, action, reward, next_obs, terminated, truncated)   # + state= for sequences
    batch = buf.sample(32)            # the writer's fields + "indices", "weights"
    buf.update_priorities(batch["indices"], td_errors)                # prioritized only
    buf.save("replay.npz"); buf = ReplayBuffer.load("replay.npz")

A saved file (.npz, no pickle, written atomically through :mod:`snrl.io`) holds the config of
the three parts, the stored rows, the writer's pending steps and the sampler's state, so a
loaded buffer continues exactly as the saved one would have.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from snrl.buffers.nstep import NStepWriter
from snrl.buffers.samplers import PrioritizedSampler, UniformSampler
from snrl.buffers.sequence import SequenceWriter
from snrl.buffers.storage import (
    Batch,
    RingStorage,
    env_rows,
    json_array,
    load_arrays,
    make_rng,
    read_json_array,
    rng_from_state,
    save_arrays,
)
from snrl.errors import UserError, explain_foreign_calls

WRITERS = {w.kind: w for w in (NStepWriter, SequenceWriter)}
SAMPLERS = {s.kind: s for s in (UniformSampler, PrioritizedSampler)}


class ReplayBuffer:
    """A replay buffer: ring storage x a writer x a sampler.

    Args:
        capacity: stored items (transitions or windows); the oldest are overwritten.
        writer: an :class:`NStepWriter` or a :class:`SequenceWriter`.
        sampler: a :class:`UniformSampler` (default, unseeded) or a
            :class:`PrioritizedSampler`.
    """

    @explain_foreign_calls(
        "ReplayBuffer(...)",
        {},
        default="snrl's ReplayBuffer(capacity, writer, sampler) is the storage inside snrl.DQN; "
        "set a DQN's replay with its options (buffer_size=, batch_size=, prioritized=, "
        "n_step=) rather than building one (NeuroTorch's ReplayBuffer(capacity=, "
        "use_priority=) is another class)",
    )
    def __init__(
        self,
        capacity: int,
        writer: NStepWriter | SequenceWriter,
        sampler: UniformSampler | PrioritizedSampler | None = None,
    ) -> None:
        self.storage = RingStorage(capacity)
        self.writer = writer
        self.sampler = sampler if sampler is not None else UniformSampler()
        self.sampler.attach(self.storage.capacity)
        for name, (shape, dtype) in writer.fields().items():
            self.storage.add_field(name, shape, dtype)

    @property
    def capacity(self) -> int:
        return self.storage.capacity

    @property
    def n_envs(self) -> int:
        return self.writer.n_envs

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return self.writer.obs_shape

    @property
    def n_pending(self) -> int:
        """Steps added but not yet written as items."""
        return self.writer.n_pending

    def __len__(self) -> int:
        return self.storage.size

    def describe(self) -> str:
        """E.g. ``"prioritized (alpha 0.6) replay of 3-step transitions of 4 envs"``."""
        return f"{self.sampler.describe()} replay of {self.writer.describe()}"

    # ---- adding --------------------------------------------------------------------------
    def add(
        self,
        obs: Any,
        action: Any,
        reward: Any,
        next_obs: Any,
        terminated: Any,
        truncated: Any,
        state: Any = None,
    ) -> np.ndarray:
        """Add one step of every env.

        ``next_obs`` must be the true next observation of each env: at an episode end, the
        final observation (``info["final_obs"]``), not the first one of the next episode.

        Args:
            obs: (n_envs, *obs_shape) observations the actions were chosen on.
            action: (n_envs, *action_shape) actions taken.
            reward: (n_envs,) rewards received.
            next_obs: (n_envs, *obs_shape) observations after the step.
            terminated: (n_envs,) bool, the episode reached a terminal state.
            truncated: (n_envs,) bool, the episode was cut (time limit); bootstraps.
            state: the recurrent state fed with ``obs`` (sequence writers; ignored by the
                n-step writer).

        Returns:
            (K,) int64 indices of the items written by this call (K may be 0).
        """
        w, e = self.writer, self.writer.n_envs
        items = w.add(
            env_rows("obs", obs, (e, *w.obs_shape), w.obs_dtype, e),
            env_rows("action", action, (e, *w.action_shape), w.action_dtype, e),
            env_rows("reward", reward, (e,), np.float64, e),
            env_rows("next_obs", next_obs, (e, *w.obs_shape), w.obs_dtype, e),
            env_rows("terminated", terminated, (e,), np.bool_, e),
            env_rows("truncated", truncated, (e,), np.bool_, e),
            state,
        )
        if items is None:
            return np.zeros(0, dtype=np.int64)
        for name in items.keys() - self.storage.fields.keys():  # state leaves, first add
            self.storage.add_field(name, items[name].shape[1:], items[name].dtype)
        idx = self.storage.write(items)
        self.sampler.on_write(idx)
        return idx

    # ---- sampling ------------------------------------------------------------------------
    def sample(self, batch_size: int, *, step: int | None = None) -> Batch:
        """Draw ``batch_size`` items (with replacement).

        Args:
            batch_size: B.
            step: the annealing step of a prioritized sampler's beta (default: its count of
                draws); ignored by the uniform sampler.

        Returns:
            The writer's fields (see ``NStepWriter.gather`` / ``SequenceWriter.gather``),
            ``indices`` (B,) int64 and ``weights`` (B,) float32 importance weights (ones
            for uniform sampling; max 1).
        """
        b = int(batch_size)
        if b < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size} (pass a positive size)")
        if b > len(self):
            raise UserError(
                f"cannot sample {b} {self.writer.item_name}: only {len(self)} stored "
                "(raise learning_starts so the buffer fills before learning, or lower batch_size)"
            )
        idx, weights = self.sampler.draw(len(self), b, step)
        batch = self.writer.gather(self.storage, idx)
        batch["indices"] = idx.astype(np.int64)
        batch["weights"] = weights.astype(np.float32)
        return batch

    def iter_batches(self, batch_size: int, n_batches: int) -> Iterator[Batch]:
        """Yield ``n_batches`` batches, each drawn by :meth:`sample` when it is requested."""
        for _ in range(int(n_batches)):
            yield self.sample(batch_size)

    def update_priorities(self, indices: Any, td_errors: Any, mask: Any = None) -> np.ndarray:
        """Set the priorities of sampled items (prioritized sampler only).

        Args:
            indices: (B,) ``indices`` of a sampled batch.
            td_errors: (B,) TD errors of transitions, or (T', B) of the trained steps of
                sequences (numpy or tensor).
            mask: (T', B) 1 for the valid steps of sequences, or None.

        Returns:
            (B,) the new priorities (before ``alpha``).
        """
        return self.sampler.update(indices, td_errors, mask, len(self))

    # ---- files ---------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """What :meth:`load` needs to rebuild the three parts."""
        return {
            "capacity": self.capacity,
            "writer": self.writer.config(),
            "sampler": self.sampler.config(),
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the buffer (items, pending steps, sampler state) to an .npz, atomically."""
        arrays = self.storage.arrays()
        arrays.update({f"writer_{k}": v for k, v in self.writer.arrays().items()})
        arrays.update({f"sampler_{k}": v for k, v in self.sampler.arrays(len(self)).items()})
        arrays["config"] = json_array(self.config())
        arrays["rng_state"] = json_array(self.sampler.rng.bit_generator.state)
        save_arrays(path, arrays)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        like: ReplayBuffer | None = None,
        state_example: Any = None,
        seed: int | np.random.Generator | None = None,
    ) -> ReplayBuffer:
        """Read a buffer written by :meth:`save`.

        Args:
            path: the .npz file.
            like: if given, the file must hold a buffer of the same composition and shapes
                (its config, capacity aside); its states' types are used.
            state_example: a state of the backbone that filled a sequence buffer, to give
                sampled states its (named) tuple types; by default namedtuples with the
                saved type and field names are made.
            seed: if given, reseeds sampling; by default the saved sampler state is restored.

        Raises:
            UserError: the file is missing or corrupt, or does not match ``like`` or
                ``state_example``.
        """
        arrays = load_arrays(path)
        cfg = read_json_array(arrays, "config", path)
        try:
            writer_cls = WRITERS[cfg["writer"]["kind"]]
            sampler_cls = SAMPLERS[cfg["sampler"]["kind"]]
            if like is not None:
                _check_like(cfg, like, path)
                if isinstance(like.writer, SequenceWriter) and state_example is None:
                    state_example = like.writer._template
            writer = writer_cls.from_config(cfg["writer"], state_example)
            sampler = sampler_cls.from_config(cfg["sampler"])
            buf = cls(int(cfg["capacity"]), writer, sampler)
        except UserError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise UserError(f"buffer file {str(path)!r} has a bad config ({e}) (save again)") from e
        buf.storage.restore(arrays, path)
        buf.writer.restore(_part(arrays, "writer_"), path)
        buf.sampler.restore(_part(arrays, "sampler_"), len(buf), path)
        if seed is not None:
            buf.sampler.rng = make_rng(seed)
        else:
            buf.sampler.rng = rng_from_state(read_json_array(arrays, "rng_state", path), path)
        return buf


def _part(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


def _check_like(cfg: dict[str, Any], like: ReplayBuffer, path: str | os.PathLike) -> None:
    """Raise unless the saved config describes a buffer composed like ``like``."""
    want = like.config()
    saved_w = {k: v for k, v in cfg["writer"].items() if not k.startswith("state_")}
    want_w = {k: v for k, v in want["writer"].items() if not k.startswith("state_")}
    if saved_w == want_w and cfg["sampler"] == want["sampler"]:
        return
    saved = ReplayBuffer(
        1, WRITERS[cfg["writer"]["kind"]].from_config(cfg["writer"]),
        SAMPLERS[cfg["sampler"]["kind"]].from_config(cfg["sampler"]),
    )  # fmt: skip
    raise UserError(
        f"buffer file {str(path)!r} holds a {saved.describe()}, not a {like.describe()} "
        "(load a buffer saved with the same settings)"
    )


__all__ = [
    "NStepWriter",
    "PrioritizedSampler",
    "ReplayBuffer",
    "RingStorage",
    "SequenceWriter",
    "UniformSampler",
]

"""``python tests/crash_run.py <snrl args>``: run the ``snrl`` command and SIGKILL this very
process at the moment named by ``SNRL_KILL_AT`` (crash-safety tests):

* ``save:last:N`` / ``save:best:N``: half-way through writing the N-th ``last.pt`` /
  ``best.pt`` of this process (half the bytes are in the temp file, nothing renamed);
* ``eval:N``: half-way through the N-th periodic evaluation (after its first episode);
* unset: no kill from inside (the test kills from outside at a random time).

With ``SNRL_KILL_NOTE=FILE``, the plan is written to FILE just before the kill.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys

import torch

import snrl.agents.evaluation as evaluation
import snrl.training.checkpoint as checkpoint
from snrl.cli import main


def _die() -> None:
    note = os.environ.get("SNRL_KILL_NOTE")
    if note:  # tell the test that the kill came from inside, at the planned moment
        with open(note, "w") as f:
            f.write(os.environ["SNRL_KILL_AT"])
    os.kill(os.getpid(), signal.SIGKILL)


def _install(plan: str) -> None:
    kind, _, rest = plan.partition(":")
    if kind == "save":
        which, _, n = rest.partition(":")
        count = [0]
        target: list[str] = [""]
        real_open, real_save = checkpoint.atomic_open, torch.save

        @contextlib.contextmanager
        def atomic_open(path, mode="wb"):
            target[0] = os.path.basename(path)
            with real_open(path, mode) as f:
                yield f

        def save(obj, f, *args, **kwargs):
            if target[0] == f"{which}.pt":
                count[0] += 1
                if count[0] == int(n):
                    buf = io.BytesIO()
                    real_save(obj, buf, *args, **kwargs)
                    data = buf.getvalue()
                    f.write(data[: len(data) // 2])
                    f.flush()
                    os.fsync(f.fileno())
                    _die()
            return real_save(obj, f, *args, **kwargs)

        checkpoint.atomic_open = atomic_open  # this helper process only
        checkpoint.torch.save = save
    elif kind == "eval":
        import snrl.agents.base as base

        count = [0]
        real_eval = evaluation.evaluate_agent

        def evaluate_agent(*args, **kwargs):
            count[0] += 1
            if count[0] == int(rest):
                real_eval(*args, **{**kwargs, "n_episodes": 1})  # one episode of it ran
                _die()
            return real_eval(*args, **kwargs)

        base.evaluate_agent = evaluate_agent  # where Algorithm.evaluate looks it up


if __name__ == "__main__":
    torch.set_num_threads(1)
    _install(os.environ.get("SNRL_KILL_AT", ""))
    sys.exit(main(sys.argv[1:]))

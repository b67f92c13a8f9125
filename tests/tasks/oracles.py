"""Scripted policies that read only the observations of a task (batched, numpy), for
comparing accuracies of snrl.tasks and NeuroGym on the same policy. Each keeps a little state
per env and forgets it when that env's trial ends."""

from __future__ import annotations

import numpy as np


class Oracle:
    """``policy(obs) -> actions`` for ``n`` envs of ``task``; :meth:`forget` at trial ends."""

    def __init__(self, task: str, n: int) -> None:
        self.task = task.removesuffix("-v0")
        self.n = n
        self.acc = np.zeros((n, 8))  # per-task sums and counters
        self.phase = np.zeros(n, dtype=np.int64)

    def forget(self, mask: np.ndarray) -> None:
        self.acc[mask] = 0.0
        self.phase[mask] = 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return getattr(self, "_" + self.task)(np.asarray(obs, dtype=np.float64))

    # Integrate the evidence while it is shown; answer once the screen goes blank.
    def _PerceptualDecisionMaking(self, obs):
        stim = obs[:, 1:3]
        shown = (stim != 0).any(axis=1)
        self.acc[:, :2] += np.where(shown[:, None], stim, 0.0)
        self.phase |= shown
        blank = (obs == 0).all(axis=1) & (self.phase > 0)
        return np.where(blank, 1 + np.argmax(self.acc[:, :2], axis=1), 0)

    def _ContextDecisionMaking(self, obs):  # implicit context: modality 1 (channels 1, 2)
        stim = obs[:, 1:3]
        shown = (obs[:, 1:] != 0).any(axis=1)
        self.acc[:, :2] += np.where(shown[:, None], stim, 0.0)
        self.phase |= shown
        blank = (obs == 0).all(axis=1) & (self.phase > 0)
        return np.where(blank, 1 + np.argmax(self.acc[:, :2], axis=1), 0)

    def _GoNogo(self, obs):
        self.acc[:, 0] = np.maximum(self.acc[:, 0], obs[:, 2])
        blank = (obs == 0).all(axis=1)
        return np.where(blank & (self.acc[:, 0] > 0.5), 1, 0)

    def _two_stimuli(self, shown, value):
        """Sums of ``value`` over the first and second stretch of ``shown`` steps."""
        # phase: 0 before the first, 1 in it, 2 between, 3 in the second, 4 after
        self.phase = np.where((self.phase == 0) & shown, 1, self.phase)
        self.phase = np.where((self.phase == 1) & ~shown, 2, self.phase)
        self.phase = np.where((self.phase == 2) & shown, 3, self.phase)
        self.phase = np.where((self.phase == 3) & ~shown, 4, self.phase)
        k = value.shape[1]
        self.acc[:, :k] += np.where((self.phase == 1)[:, None], value, 0.0)
        self.acc[:, k : 2 * k] += np.where((self.phase == 3)[:, None], value, 0.0)
        self.acc[:, 6] += self.phase == 1
        self.acc[:, 7] += self.phase == 3

    def _DelayMatchSample(self, obs):
        self._two_stimuli((obs[:, 1:] != 0).any(axis=1), obs[:, 1:3] - 0.5)
        same = (self.acc[:, 0:2] * self.acc[:, 2:4]).sum(axis=1) > 0
        return np.where(obs[:, 0] == 0, np.where(same, 1, 2), 0)

    def _DelayComparison(self, obs):
        self._two_stimuli(obs[:, 1] != 0, obs[:, 1:2])
        first = self.acc[:, 0] / np.maximum(self.acc[:, 6], 1)
        second = self.acc[:, 1] / np.maximum(self.acc[:, 7], 1)
        return np.where(obs[:, 0] == 0, np.where(first > second, 1, 2), 0)

    def _IntervalDiscrimination(self, obs):
        self.acc[:, 0] += obs[:, 1] == 1
        self.acc[:, 1] += obs[:, 2] == 1
        blank = (obs == 0).all(axis=1)
        return np.where(blank, np.where(self.acc[:, 0] > self.acc[:, 1], 1, 2), 0)

    def _ReadySetGo(self, obs):
        # phase 1 from "ready" on, counting steps (acc 0); phase 2 from "set" on, counting
        # steps (acc 1) until they equal the measured interval
        self.phase = np.where((self.phase == 0) & (obs[:, 1] == 1), 1, self.phase)
        self.phase = np.where((self.phase == 1) & (obs[:, 2] == 1), 2, self.phase)
        go = (self.phase == 2) & (self.acc[:, 1] >= self.acc[:, 0])
        self.acc[:, 0] += self.phase == 1
        self.acc[:, 1] += self.phase == 2
        return go.astype(np.int64)

    def _DualDelayMatchSample(self, obs):
        # noise (on every channel) marks the sample and the test periods; the tested item is
        # the one whose channels carry a signal; its test matches when it points the same way
        noisy = obs[:, 0] != 1
        self.phase = np.where((self.phase == 0) & noisy, 1, self.phase)
        self.phase = np.where((self.phase == 1) & ~noisy, 2, self.phase)
        in_sample = (self.phase == 1)[:, None]
        self.acc[:, :4] += np.where(in_sample, obs[:, 1:5], 0.0)
        second = np.linalg.norm(obs[:, 3:5], axis=1) > np.linalg.norm(obs[:, 1:3], axis=1)
        k = np.where(second, 2, 0)[:, None] + np.arange(2)
        sample = np.take_along_axis(self.acc, k, axis=1)
        test = np.take_along_axis(obs[:, 1:5], k, axis=1)
        match = (sample * test).sum(axis=1) > 0.5 * np.linalg.norm(sample, axis=1)
        return np.where((self.phase == 2) & noisy, np.where(match, 1, 2), 0)


class Yang19Oracle:
    """A scripted policy for a task of the yang19 collection (``short``: ``go``, ``dm1`` ...)
    reading only the observations: it sums each ring's channels over the trial and answers
    toward the strongest direction (of the rings the task attends; anti: the opposite one)
    once the fixation cue is off and nothing is shown (go/anti: once the cue is off)."""

    def __init__(self, short: str, n: int) -> None:
        self.short = short
        self.acc = np.zeros((n, 32))
        weights = {"dm1": (1, 0), "ctxdm1": (1, 0), "dm2": (0, 1), "ctxdm2": (0, 1)}
        self.w = np.asarray(weights.get(short.replace("dly", ""), (1, 1)), dtype=np.float64)

    def forget(self, mask: np.ndarray) -> None:
        self.acc[mask] = 0.0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)[:, :33]
        self.acc += obs[:, 1:33]
        seen = (self.acc != 0).any(axis=1)
        score = self.w[0] * self.acc[:, :16] + self.w[1] * self.acc[:, 16:]
        direction = np.argmax(score, axis=1)
        if "anti" in self.short:
            direction = (direction + 8) % 16
        if self.short.endswith(("go", "anti")):
            answer = (obs[:, 0] == 0) & seen
        else:
            answer = (obs == 0).all(axis=1) & seen
        return np.where(answer, 1 + direction, 0)

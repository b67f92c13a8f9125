"""Loopback load: concurrent clients step one env server; no step is lost or applied twice,
even when responses are lost and the client retries. Small by default; the full size
(8 clients x 10k steps) is marked slow."""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from snrl.envs.remote import RemoteEnv  # noqa: E402
from snrl.envs.remote_server import EnvServer  # noqa: E402


class LossyTransport(httpx.HTTPTransport):
    """Delivers every request, then loses the response of a seeded fraction of them (the
    server applied the call; the client sees a network error and retries)."""

    def __init__(self, loss: float, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.loss, self.rng, self.lost = loss, np.random.default_rng(seed), 0

    def handle_request(self, request):
        response = super().handle_request(request)
        if self.rng.random() < self.loss:
            response.read()
            response.close()
            self.lost += 1
            raise httpx.ReadError("response lost (test)")
        return response


def _client(server, i: int, loss: float) -> tuple[RemoteEnv, LossyTransport]:
    env = RemoteEnv(server.url, token=server.token, timeout=30.0, retries=8, backoff=0.0)
    transport = LossyTransport(loss, seed=100 + i)
    env._client = httpx.Client(
        headers=env._client.headers, timeout=env._client.timeout, transport=transport
    )
    return env, transport


def _run(n_clients: int, n_steps: int, loss: float) -> None:
    with EnvServer("CartPole-v1", max_sessions=n_clients) as server:
        results: dict[int, dict] = {}
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                env, transport = _client(server, i, loss)
                ref = gym.make("CartPole-v1")  # the same env in-process: the oracle
                rng = np.random.default_rng(i)
                obs, _ = env.reset(seed=i)
                want, _ = ref.reset(seed=i)
                resets, mismatches = 1, 0
                for _ in range(n_steps):
                    mismatches += not np.array_equal(obs, want)
                    a = int(rng.integers(2))
                    obs, _, te, tr, _ = env.step(a)
                    want, _, te2, tr2, _ = ref.step(a)
                    mismatches += (te, tr) != (te2, tr2)
                    if te or tr:
                        obs, _ = env.reset()
                        want, _ = ref.reset()
                        resets += 1
                counters = env.counters()
                env.close()
                results[i] = dict(
                    counters=counters, resets=resets, mismatches=mismatches, lost=transport.lost
                )
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)  # a bound, not a measurement: a stuck client fails the test
        assert not any(t.is_alive() for t in threads), "a client did not finish"
        assert not errors, errors
        assert sorted(results) == list(range(n_clients))
        for r in results.values():
            c = r["counters"]
            # server and client agree: every step applied exactly once
            assert c["steps"] == n_steps and c["resets"] == r["resets"]
            assert c["seq"] == n_steps + r["resets"]
            assert r["mismatches"] == 0  # and in order: the trajectory is the local env's
        if loss:
            assert sum(r["lost"] for r in results.values()) > 0  # retries were exercised
        assert not server.app.sessions


def test_concurrent_clients_with_lost_responses_lose_and_repeat_no_step():
    _run(n_clients=8, n_steps=60, loss=0.1)


@pytest.mark.slow
def test_load_8_clients_x_10k_steps():
    _run(n_clients=8, n_steps=10_000, loss=0.01)

"""The env server's limits under load and hostile peers: idle sessions expire, sessions are
counted per client, a failed vector env closes what it opened, slow connections (partial
heads or bodies) are cut off and their number is bounded, a slow env stalls only its own
session; and the client's checks of URLs and options. Every socket here is loopback, and
every loop is bounded in count."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from snrl.envs import make_env, make_vector_env
from snrl.errors import UserError

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from snrl.envs.remote import RemoteEnv, RemoteEnvError, check_url  # noqa: E402
from snrl.envs.remote_server import EnvServer  # noqa: E402

#: Released by the test that holds SlowEnv's step (a bound, not a measurement).
RELEASE = threading.Event()
ENTERED = threading.Event()


class SlowEnv(gym.Env):
    """Action 1 blocks in step until the test sets RELEASE; action 0 steps at once."""

    observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        if action == 1:
            ENTERED.set()
            assert RELEASE.wait(timeout=60)
        return np.zeros(1, np.float32), 1.0, False, False, {}


def _auth(server) -> dict:
    return {"Authorization": f"Bearer {server.token}"}


# ---- sessions ----------------------------------------------------------------------------------
def test_a_failed_vector_env_closes_the_sessions_it_opened(monkeypatch):
    with EnvServer("CartPole-v1", max_sessions=3) as server:
        monkeypatch.setenv("SNRL_ENV_TOKEN", server.token)
        with pytest.raises(RemoteEnvError, match="3 sessions are open"):
            make_vector_env(server.url, 5, seed=0)  # the report's --n-envs 70 over 64
        assert server.app.sessions == {}  # the three it opened were closed
        envs = make_vector_env(server.url, 3, seed=0)  # so the next run is served
        envs.reset()
        envs.close()
        assert server.app.sessions == {}


def test_idle_sessions_are_closed_and_say_so():
    with EnvServer("CartPole-v1", max_sessions=1, idle_timeout=0.2) as server:
        leaked = RemoteEnv(server.url, token=server.token)  # a client killed with SIGKILL
        leaked.reset(seed=0)
        time.sleep(0.5)  # longer than idle_timeout
        fresh = RemoteEnv(server.url, token=server.token)  # not refused: the old one expired
        fresh.reset(seed=0)
        with pytest.raises(RemoteEnvError, match=r"HTTP 410.*unused for over 0.2 s"):
            leaked.step(0)
        fresh.step(0)
        fresh.close()
        leaked.close()


def test_sessions_are_counted_per_client():
    with EnvServer("CartPole-v1", max_sessions=8, max_client_sessions=2) as server:
        mine = [RemoteEnv(server.url, token=server.token) for _ in range(2)]
        with pytest.raises(RemoteEnvError, match="this client holds 2 sessions"):
            RemoteEnv(server.url, token=server.token)
        with httpx.Client(base_url=server.url, headers=_auth(server), timeout=10) as c:
            other = c.post("/v1/sessions", headers={"X-SNRL-Client": "another-run"})
            assert other.status_code == 200  # another process still gets its sessions
            bad = c.post("/v1/sessions", headers={"X-SNRL-Client": "../x"})
            assert bad.status_code == 400 and "X-SNRL-Client" in bad.json()["error"]
        for env in mine:
            env.close()
        RemoteEnv(server.url, token=server.token).close()


def test_a_slow_env_stalls_only_its_own_session():
    RELEASE.clear()
    ENTERED.clear()
    with EnvServer(f"{__name__}:SlowEnv") as server:
        slow = RemoteEnv(server.url, token=server.token, timeout=60)
        fast = RemoteEnv(server.url, token=server.token, timeout=60)
        slow.reset()
        fast.reset()
        stuck = threading.Thread(target=slow.step, args=(1,), daemon=True)
        stuck.start()
        assert ENTERED.wait(timeout=60)  # the slow step is running on the server now
        for _ in range(20):  # the other session steps meanwhile
            assert fast.step(0)[1] == 1.0
        assert fast.counters()["steps"] == 20 and stuck.is_alive()
        RELEASE.set()
        stuck.join(timeout=60)
        assert slow.counters()["steps"] == 1
        slow.close()
        fast.close()


def test_huge_shapes_in_options_and_actions_are_422(server_raw):
    server, c = server_raw
    sid = c.post("/v1/sessions").json()["session"]
    huge = {"dtype": "float64", "shape": [0, 10**30], "data": []}
    r = c.post(f"/v1/sessions/{sid}/reset", json={"seq": 1, "options": {"x": {"ndarray": huge}}})
    assert r.status_code == 422 and "dimension over" in r.json()["error"]
    assert c.post(f"/v1/sessions/{sid}/reset", json={"seq": 1}).status_code == 200
    r = c.post(f"/v1/sessions/{sid}/step", json={"seq": 2, "action": huge})
    assert r.status_code == 422 and "dimension over" in r.json()["error"]


def test_a_session_twice_in_one_batch_is_refused_not_deadlocked(server_raw):
    server, c = server_raw
    a, b = (c.post("/v1/sessions").json()["session"] for _ in range(2))
    for sid in (a, b):
        assert c.post(f"/v1/sessions/{sid}/reset", json={"seq": 1, "seed": 0}).status_code == 200
    act = {"dtype": "int64", "shape": [], "data": [1]}
    calls = [{"session": sid, "seq": 2, "action": act} for sid in (b, a, b)]
    results = c.post("/v1/step", json={"calls": calls}).json()["results"]
    assert [r.get("seq") for r in results[:2]] == [2, 2]
    assert results[2]["status"] == 400 and "twice" in results[2]["error"]
    assert c.get(f"/v1/sessions/{b}").json()["steps"] == 1  # stepped once, not twice


@pytest.fixture
def server_raw():
    with EnvServer("CartPole-v1") as server:
        with httpx.Client(base_url=server.url, headers=_auth(server), timeout=10) as c:
            yield server, c


# ---- connections -------------------------------------------------------------------------------
def _connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (the socket's timeout bounds each read)."""
    data = b""
    for _ in range(100):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _slowloris(server, n: int) -> list[socket.socket]:
    """``n`` connections that send the start of a request head and then nothing."""
    socks = []
    for _ in range(n):
        sock = _connect(server)
        sock.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        socks.append(sock)
    return socks


def test_partial_heads_are_cut_off_after_the_header_timeout():
    with EnvServer("CartPole-v1", header_timeout=0.5, max_connections=50) as server:
        held = _slowloris(server, 10)
        for sock in held:  # each is closed by the server after header_timeout
            assert _read_all(sock).startswith(b"HTTP/1.1 408")
            sock.close()
        env = RemoteEnv(server.url, token=server.token)
        env.reset(seed=0)
        env.close()


def test_a_flood_of_slow_connections_cannot_lock_a_client_out():
    # the report: 3,000 partial heads held for 110 s starved real clients; here 60 against a
    # limit of 10, with a header timeout (60 s) far longer than the test
    with EnvServer("CartPole-v1", header_timeout=60, max_connections=10) as server:
        flood = _slowloris(server, 60)
        env = RemoteEnv(server.url, token=server.token)  # its connection pushes one out
        env.reset(seed=0)
        for _ in range(5):
            env.step(1)
        more = _slowloris(server, 20)  # a second wave, while the client holds a session
        env.step(0)
        assert env.counters()["steps"] == 6
        env.close()
        # every connection over the limit was closed: the oldest slow ones first
        socks = flood + more
        pushed_out, pending = 0, list(socks)
        for _ in range(50):  # bounded; the newest 10 stay silent
            readable, _, _ = select.select(pending, [], [], 0.1)
            for sock in readable:  # closed by the server: 503 first, or a reset
                try:
                    reply = sock.recv(64)
                except ConnectionResetError:
                    reply = b""
                pushed_out += reply == b"" or reply.startswith(b"HTTP/1.1 503")
                pending.remove(sock)
            if pushed_out >= 60 + 20 - 10:
                break
        for sock in socks:
            sock.close()
        assert pushed_out >= 60 + 20 - 10


def test_a_trickled_head_or_body_is_cut_off_whatever_its_pace():
    with EnvServer("CartPole-v1", header_timeout=0.5, body_timeout=0.5) as server:
        auth = f"Authorization: Bearer {server.token}\r\n".encode()
        # a head sent one byte at a time (each byte well inside any per-read timeout)
        sock = _connect(server)
        sent = 0
        try:
            for _ in range(200):  # 200 x 0.05 s = 10 s if never cut off
                sock.sendall(b"X")
                sent += 1
                time.sleep(0.05)
        except OSError:  # the server hung up
            pass
        assert sent < 200
        sock.close()
        # a complete head, then a body that never completes
        sock = _connect(server)
        sock.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\n" + auth)
        sock.sendall(b"Content-Length: 100\r\n\r\n{")
        assert _read_all(sock).startswith(b"HTTP/1.1 408")
        sock.close()
        assert server.app.sessions == {}
        env = RemoteEnv(server.url, token=server.token)
        env.reset(seed=0)
        env.close()


# ---- client arguments --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url, match",
    [
        ("http://127.0.0.1:abc", "does not parse"),
        ("http://[::1", "does not parse"),
        ("http://127.0.0.1 :8765", "space"),
        ("http://127.0.0.1:87\t65", "space"),
        ("http://127.0.0.1:8765/\x1b[2J", "control"),
        ("http://①②⑦.0.0.1:8765", "non-ASCII"),
        ("http://:8765", "no host"),
        ("http://127.0.0.1:0", "port 0"),
        ("http://127.0.0.1:70000", "does not parse"),
        ("ftp://127.0.0.1:8765", "must start with http"),
    ],
)
def test_bad_urls_are_user_errors(url, match):
    with pytest.raises(UserError, match=match):
        check_url(url)
    with pytest.raises(UserError, match=match):
        RemoteEnv(url, token="t" * 20)


def test_check_url_keeps_a_good_url():
    assert check_url("http://127.0.0.1:8765/sims/cart/?x=1") == "http://127.0.0.1:8765/sims/cart"
    assert check_url("https://[::1]:9000") == "https://[::1]:9000"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"timeout": "5"}, "timeout='5'"),
        ({"timeout": None}, "timeout=None"),
        ({"timeout": 1e308}, "timeout=1e\\+308"),
        ({"timeout": float("nan")}, "timeout=nan"),
        ({"timeout": 0}, "timeout=0"),
        ({"timeout": True}, "timeout=True"),
        ({"retries": 1.5}, "retries=1.5"),
        ({"retries": 10**30}, "retries=1000000000000000000000000000000"),
        ({"backoff": -1}, "backoff=-1"),
        ({"backoff": "0.1"}, "backoff='0.1'"),
    ],
)
def test_bad_client_options_are_user_errors_naming_the_option(kwargs, match):
    with pytest.raises(UserError, match=match):
        make_env("http://127.0.0.1:1", token="t" * 20, **kwargs)


def test_an_env_constructor_refusing_its_kwargs_is_a_user_error():
    with pytest.raises(UserError, match=r"FrozenLake-v1 failed with the arguments.*99x99"):
        make_env("FrozenLake-v1", map_name="99x99")
    with pytest.raises(UserError, match="99x99"):
        EnvServer("FrozenLake-v1", env_kwargs={"map_name": "99x99"})


def test_sessions_left_open_end_when_the_process_exits(tmp_path):
    with EnvServer("CartPole-v1", token="exit-token-0123456789") as server:
        code = (
            "import sys; from snrl.envs.remote import RemoteEnv\n"
            "envs = [RemoteEnv(sys.argv[1], token='exit-token-0123456789') for _ in range(3)]\n"
            "envs[0].reset(seed=0)\n"
            "print(len(envs), flush=True)\n"
            "raise SystemExit(2)  # a run that stops on an error without closing its envs\n"
        )
        root = str(Path(__file__).resolve().parents[2])
        proc = subprocess.run(
            [sys.executable, "-c", code, server.url],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": root},
        )
        assert proc.returncode == 2 and proc.stdout == "3\n", proc.stderr
        assert server.app.sessions == {}
        assert len(server.app.closed) == 3

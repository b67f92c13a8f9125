"""The remote protocol under hostile peers, both ways: malformed requests to the env server
(each gets a 4xx with a message, and afterwards the server still serves a session
correctly), and a hostile server answering the client (only RemoteEnvError / UserError come
out, within the call's deadline). Hand-written cases first, then generated ones (seeded)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import quote

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from snrl.errors import UserError

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from snrl.envs.remote import (  # noqa: E402
    MAX_REPLY,
    RemoteEnv,
    RemoteEnvError,
    encode_array,
    encode_obs,
    encode_space,
)
from snrl.envs.remote_server import EnvServer  # noqa: E402

MAX_BODY = 4096


def _act(value, dtype="int64", shape=()):
    return {"dtype": dtype, "shape": list(shape), "data": value}


def _cases(sid: str, closed: str, fresh: str) -> list[tuple]:
    """(method, path, body, status): body is bytes (sent as is) or an object (as JSON)."""
    step = f"/v1/sessions/{sid}/step"
    reset = f"/v1/sessions/{sid}/reset"
    bad_bodies = [
        b"",
        b"{",
        b"[]",
        b"null",
        b"42",
        b'"text"',
        b'{"seq": NaN, "action": 1}',
        b'{"seq": Infinity}',
        b'{"seq": -Infinity}',
        b"\xff\xfe\x00",
        b"[" * 2000 + b"]" * 2000,  # deeper than the JSON parser recurses
        b'{"seq": 2, "action": {"dtype": "int64", "shape": [], "data": [1]}',
    ]
    out: list[tuple] = [("POST", step, b, 400) for b in bad_bodies]
    bad_steps = [
        ({"seq": "2", "action": _act([1])}, 400),
        ({"seq": True, "action": _act([1])}, 400),
        ({"seq": 2.0, "action": _act([1])}, 400),
        ({"seq": None, "action": _act([1])}, 400),
        ({"seq": 2}, 400),
        ({"seq": 2, "action": 1}, 422),
        ({"seq": 2, "action": [1]}, 422),
        ({"seq": 2, "action": None}, 422),
        ({"seq": 2, "action": _act([1.0], "float32")}, 422),
        ({"seq": 2, "action": _act([True], "bool")}, 422),
        ({"seq": 2, "action": _act([1, 0], shape=(2,))}, 422),
        ({"seq": 2, "action": _act([1], shape=(1,))}, 422),
        ({"seq": 2, "action": _act([2])}, 422),
        ({"seq": 2, "action": _act([-1])}, 422),
        ({"seq": 2, "action": _act([2**70])}, 422),
        ({"seq": 2, "action": _act([1], "object")}, 422),
        ({"seq": 2, "action": _act([1], "complex128")}, 422),
        ({"seq": 2, "action": _act(["1"])}, 422),
        ({"seq": 2, "action": _act([True])}, 422),
        ({"seq": 2, "action": _act([1.5])}, 422),
        ({"seq": 2, "action": _act([[1]])}, 422),
        ({"seq": 2, "action": _act(1)}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": []}}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": [], "b64": "%%%"}}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": [], "b64": "AAAA"}}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": [-3], "data": []}}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": [2**40, 2**40], "data": []}}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": "[]", "data": [1]}}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": [True], "data": [1]}}, 422),
        ({"seq": 2, "action": {"dtype": "int64", "shape": [0] * 64, "data": []}}, 422),
        ({"seq": 0, "action": _act([1])}, 409),
        ({"seq": -1, "action": _act([1])}, 409),
        ({"seq": 3, "action": _act([1])}, 409),
        ({"seq": 10**30, "action": _act([1])}, 409),
    ]
    out += [("POST", step, body, status) for body, status in bad_steps]
    bad_resets = [
        ({"seq": 2, "seed": "x"}, 422),
        ({"seq": 2, "seed": -1}, 422),
        ({"seq": 2, "seed": 2**64}, 422),
        ({"seq": 2, "seed": 1.5}, 422),
        ({"seq": 2, "seed": True}, 422),
        ({"seq": 2, "options": [1]}, 422),
        ({"seq": 2, "options": {"ndarray": {"dtype": "x", "shape": []}}}, 422),
        ({"seed": 0}, 400),
    ]
    out += [("POST", reset, body, status) for body, status in bad_resets]
    valid = {"seq": 2, "action": _act([1])}
    out += [
        ("POST", "/v1/sessions/nope/step", valid, 404),
        ("POST", f"/v1/sessions/{closed}/step", valid, 410),
        ("POST", f"/v1/sessions/{closed}/reset", {"seq": 1}, 410),
        ("GET", f"/v1/sessions/{closed}", None, 410),
        ("DELETE", "/v1/sessions/" + "a" * 10_000, None, 404),
        ("POST", f"/v1/sessions/{fresh}/step", {"seq": 1, "action": _act([1])}, 409),
        ("POST", step, {"seq": 2, "action": _act([1] * MAX_BODY, shape=(MAX_BODY,))}, 413),
        ("GET", step, None, 405),
        ("PUT", "/v1/sessions", {}, 405),
        ("GET", "/v1/nothing", None, 404),
        ("GET", "/../../etc/passwd", None, 404),
        ("POST", "/v1/step", {"calls": "x"}, 400),
        ("POST", "/v1/step", {"calls": []}, 400),
        ("POST", "/v1/step", {"calls": [valid] * 9}, 400),  # more than max_sessions
        ("POST", "/v1/step", b"{", 400),
    ]
    return out


def _send(client, method, path, body, headers=None):
    if isinstance(body, bytes) or body is None:
        return client.request(method, path, content=body, headers=headers)
    return client.request(method, path, content=json.dumps(body).encode(), headers=headers)


def test_malformed_requests_get_a_4xx_and_the_server_keeps_serving():
    with EnvServer("CartPole-v1", max_body=MAX_BODY, max_sessions=8) as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=10) as c:
            sid = c.post("/v1/sessions").json()["session"]
            assert c.post(f"/v1/sessions/{sid}/reset", json={"seq": 1, "seed": 0}).is_success
            closed = c.post("/v1/sessions").json()["session"]
            assert c.delete(f"/v1/sessions/{closed}").is_success
            fresh = c.post("/v1/sessions").json()["session"]
            cases = _cases(sid, closed, fresh)
            auth_cases = [
                {"Authorization": ""},
                {"Authorization": "Bearer"},
                {"Authorization": "Bearer " + server.token[:-1]},
                {"Authorization": "Basic " + server.token},
                {"Authorization": "Bearer " + server.token + "x"},
            ]
            assert len(cases) + len(auth_cases) >= 50
            for method, path, body, status in cases:
                r = _send(c, method, path, body)
                assert r.status_code == status, (method, path[:80], str(body)[:80], r.text[:200])
                if status not in (404, 405):  # the router's own answers are plain text
                    assert r.json()["error"], r.text
            for headers in auth_cases:
                r = c.get("/v1/spaces", headers=headers)
                assert r.status_code == 401, headers
            # chunked body without a length, over the limit: refused while it streams
            r = c.post(
                f"/v1/sessions/{sid}/step",
                content=iter([b'{"seq": 2, "pad": "' + b"x" * 1024] * 8 + [b'"}']),
            )
            assert r.status_code == 413
            # still serving: the session is where it was (seq 1) and steps like a local env
            assert c.get(f"/v1/sessions/{sid}").json() == {
                "session": sid,
                "seq": 1,
                "steps": 0,
                "resets": 1,
            }
            ok = c.post(
                f"/v1/sessions/{sid}/step", json={"seq": 2, "action": encode_array(np.int64(1))}
            )
            ref = gym.make("CartPole-v1")
            ref.reset(seed=0)
            want = ref.step(1)[0]
            assert ok.status_code == 200 and ok.json()["observation"]["data"] == want.tolist()
        env = RemoteEnv(server.url, token=server.token)  # new clients still served
        env.reset(seed=1)
        env.step(0)
        env.close()


def test_session_limit_is_a_clear_refusal_and_frees_on_close():
    with EnvServer("CartPole-v1", max_sessions=2) as server:
        a = RemoteEnv(server.url, token=server.token)
        b = RemoteEnv(server.url, token=server.token)
        with pytest.raises(Exception, match="2 sessions are open"):
            RemoteEnv(server.url, token=server.token)
        a.close()
        RemoteEnv(server.url, token=server.token).close()
        b.close()


# ---- the other direction: a hostile server answering the real client --------------------------
TOKEN = "fake-token-0123456789"
OBS_SPACE = spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT_SPACE = spaces.Discrete(2)


def _created(**over) -> dict:
    return {
        "session": "s1",
        "protocol": 1,
        "env": "Fake-v0",
        "observation_space": encode_space(OBS_SPACE),
        "action_space": encode_space(ACT_SPACE),
        **over,
    }


def _obs() -> dict:
    return encode_obs(OBS_SPACE, np.zeros(3, np.float32))


def _http(body: bytes, status: int = 200, headers: tuple = ()) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"content-length: {len(body)}", "connection: close"]
    head += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _json_reply(obj, status: int = 200) -> bytes:
    return _http(json.dumps(obj).encode(), status)


class FakeServer:
    """A loopback-only TCP server that answers each request (one per connection) with the
    next scripted reply: bytes sent at once, or a callable given the socket (to trickle)."""

    def __init__(self) -> None:
        self.replies: list[bytes | Callable[[socket.socket], None]] = []
        self.requests: list[bytes] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    while len(body) < length:
                        body += conn.recv(65536)
                    self.requests.append(head + b"\r\n\r\n" + body)
                    reply = self.replies.pop(0) if self.replies else _http(b"", 599)
                    if callable(reply):
                        reply(conn)
                    else:
                        conn.sendall(reply)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._sock.close()


@pytest.fixture
def fake():
    server = FakeServer()
    yield server
    server.close()


def _env(fake: FakeServer, timeout: float = 2.0) -> RemoteEnv:
    fake.replies.append(_json_reply(_created()))
    return RemoteEnv(fake.url, token=TOKEN, timeout=timeout, retries=0)


def _trickle(prefix: bytes, period: float, count: int, sent: list) -> Callable:
    def send(conn: socket.socket) -> None:
        conn.sendall(prefix)
        for _ in range(count):  # bounded: stops by itself
            time.sleep(period)
            conn.sendall(b" ")  # raises once the client has hung up
            sent.append(1)

    return send


def test_hostile_answers_named_in_the_report_are_clear_errors(fake):
    # Discrete(n=2**70): OverflowError before
    bad_space = _created(action_space={"type": "Discrete", "n": 2**70, "start": 0})
    fake.replies.append(_json_reply(bad_space))
    with pytest.raises(RemoteEnvError, match="'action_space'.*'n' is 1180591620717411303424"):
        RemoteEnv(fake.url, token=TOKEN, retries=0)
    # info as a list: AttributeError before
    env = _env(fake)
    fake.replies.append(_json_reply({"seq": 1, "observation": _obs(), "info": [1, 2]}))
    with pytest.raises(RemoteEnvError, match="bad reset answer: field 'info' must be an object"):
        env.reset()
    # the same seq works once the server answers properly (the call was applied: seq 1)
    fake.replies.append(_json_reply({"seq": 2, "observation": _obs(), "info": {}}))
    obs, info = env.reset()
    assert obs.shape == (3,) and info == {}
    # a small gzip answer that inflates past the cap: refused, without inflating it all
    bomb = gzip.compress(b" " * (MAX_REPLY + 1024), compresslevel=9)
    assert len(bomb) < MAX_REPLY // 500
    fake.replies.append(_http(bomb, headers=(("content-encoding", "gzip"),)))
    with pytest.raises(RemoteEnvError, match=f"over {MAX_REPLY} bytes"):
        env.reset()
    # a plain answer over the cap: announced as such (refused before reading), or with no
    # length, read until the server closes (refused at the cap)
    fake.replies.append(_http(b" " * (MAX_REPLY + 10)))
    with pytest.raises(RemoteEnvError, match=f"over {MAX_REPLY} bytes \\({MAX_REPLY + 10}\\)"):
        env.reset()
    unannounced = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + b" " * (MAX_REPLY + 10)
    fake.replies.append(unannounced)
    with pytest.raises(RemoteEnvError, match=f"over {MAX_REPLY} bytes \\(is it"):
        env.reset()
    env.close()


@pytest.mark.parametrize("where", ["head", "body"])
def test_a_trickling_server_is_cut_off_at_the_deadline(fake, where):
    env = _env(fake, timeout=1.0)
    # one byte every 0.2 s for up to 20 s: each read is quick (the read timeout is 1 s), the
    # whole answer is not
    prefix = b"HTTP/1.1 200 OK\r\n"
    if where == "body":
        prefix = b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\nconnection: close\r\n\r\n{"
    sent: list = []
    fake.replies.append(_trickle(prefix, 0.2, 100, sent))
    with pytest.raises(RemoteEnvError, match="ReadTimeout"):
        env.reset()
    env.close()
    fake.close()  # waits for the trickle to end: it broke off when the client hung up
    assert len(sent) < 100


def test_a_refused_call_keeps_the_sequence_so_the_session_lives_on(server_cp):
    env = RemoteEnv(server_cp.url, token=server_cp.token)
    env.reset(seed=0)
    with pytest.raises(RemoteEnvError, match="HTTP 422.*outside the action space") as e:
        env.step(5)  # Discrete(2): refused by the server, not applied
    assert e.value.status == 422
    for _ in range(3):
        env.step(1)
    env.reset()
    assert env.counters()["steps"] == 3 and env.counters()["seq"] == 5
    env.close()


@pytest.fixture
def server_cp():
    with EnvServer("CartPole-v1") as srv:
        yield srv


# ---- generated cases ---------------------------------------------------------------------------
def _odd_values(rng: np.random.Generator) -> list:
    """JSON values a hostile peer might put anywhere."""
    deep: object = 1
    for _ in range(int(rng.integers(17, 60))):
        deep = [deep]
    return [
        None,
        True,
        0,
        -1,
        2**63,
        2**70,
        -(2**70),
        10**400,
        1e308,
        -0.0,
        1.5,
        "",
        "nan",
        "x" * int(rng.integers(1, 5000)),
        "\x1b[31mred\x1b[0m",
        [],
        [1, "a", None],
        {},
        {"ndarray": {"dtype": "float64", "shape": [0, 10**30], "data": []}},
        {"dtype": "float32", "shape": [3], "data": [1, 2]},
        {"dtype": "float32", "shape": [3], "b64": "!!!"},
        {"dtype": "float32", "shape": [2**40], "data": []},
        {"dtype": "complex64", "shape": [3], "data": [1, 2, 3]},
        {"type": "Discrete", "n": 2**70},
        {"type": "Box", "shape": [2**25, 2**25]},
        deep,
    ]


def _mutate(obj, rng: np.random.Generator, odd: list, depth: int = 0):
    """``obj`` with one generated change somewhere inside (a key dropped or added, a value
    replaced, a list cut or grown, a type swapped)."""
    if isinstance(obj, dict) and obj and rng.random() < 0.7 and depth < 6:
        out = dict(obj)
        key = list(out)[int(rng.integers(len(out)))]
        r = rng.random()
        if r < 0.15:
            del out[key]
        elif r < 0.25:
            out["extra" + str(int(rng.integers(100)))] = odd[int(rng.integers(len(odd)))]
        elif r < 0.5:
            out[key] = odd[int(rng.integers(len(odd)))]
        else:
            out[key] = _mutate(out[key], rng, odd, depth + 1)
        return out
    if isinstance(obj, list) and obj and rng.random() < 0.7 and depth < 6:
        out = list(obj)
        i = int(rng.integers(len(out)))
        r = rng.random()
        if r < 0.2:
            del out[i]
        elif r < 0.35:
            out.append(out[i])
        else:
            out[i] = _mutate(out[i], rng, odd, depth + 1)
        return out
    return odd[int(rng.integers(len(odd)))]


def _step_answer(seq: int) -> dict:
    obs = _obs()
    return dict(seq=seq, observation=obs, reward=1.0, terminated=False, truncated=False, info={})


def _hostile_reply(rng: np.random.Generator, valid: dict) -> bytes:
    """A reply built from ``valid``: mutated JSON, or broken HTTP/JSON bytes."""
    odd = _odd_values(rng)
    kind = rng.random()
    if kind < 0.7:
        obj = _mutate(valid, rng, odd)
        for _ in range(int(rng.integers(0, 3))):
            obj = _mutate(obj, rng, odd)
        return _http(json.dumps(obj).encode())
    body = json.dumps(valid).encode()
    choices = [
        _http(body[: int(rng.integers(len(body)))]),  # cut JSON
        _http(b"\xff\xfe" + body),  # not UTF-8
        _http(b"NaN"),
        _http(b"[" * 5000),
        _http(body, status=int(rng.choice([201, 204, 301, 400, 404, 409, 410, 500, 503]))),
        _json_reply({"error": odd[int(rng.integers(len(odd)))]}, status=422),
        _http(gzip.compress(body), headers=(("content-encoding", "gzip"),)),  # valid, gzip
        _http(body, headers=(("content-encoding", "br"),)),
        _http(b"\x1f\x8b" + body, headers=(("content-encoding", "gzip"),)),  # not gzip
        b"HTTP/1.1 200 OK\r\ncontent-length: 99999\r\nconnection: close\r\n\r\n" + body,
        b"not http at all\r\n\r\n",
        b"",
    ]
    return choices[int(rng.integers(len(choices)))]


def _expect_clean(call: Callable[[], object]) -> str:
    """Run ``call``; only the documented errors may come out of it."""
    try:
        call()
    except (RemoteEnvError, UserError) as e:
        message = str(e)
        assert message and "\x1b" not in message and len(message) < 2000, message[:300]
        return type(e).__name__
    return "ok"


def test_generated_hostile_answers_raise_only_the_documented_errors(fake):
    rng = np.random.default_rng(20261204)
    outcomes: dict[str, int] = {}
    n_cases = 0
    for case in range(240):
        stage = case % 3
        if stage == 0:  # the session's creation: spaces, session id
            fake.replies.append(_hostile_reply(rng, _created()))

            def call() -> None:
                RemoteEnv(fake.url, token=TOKEN, timeout=2.0, retries=0).close()

            outcome = _expect_clean(call)
        else:
            env = _env(fake)
            if stage == 1:  # a reset answer
                fake.replies.append(
                    _hostile_reply(rng, {"seq": 1, "observation": _obs(), "info": {"a": 1}})
                )
                outcome = _expect_clean(env.reset)
            else:  # a step answer
                fake.replies.append(_json_reply({"seq": 1, "observation": _obs(), "info": {}}))
                env.reset()
                fake.replies.append(_hostile_reply(rng, _step_answer(2)))
                outcome = _expect_clean(lambda env=env: env.step(1))
            assert not fake.replies  # the hostile answer was asked for
            fake.replies.append(_json_reply({"session": "s1", "closed": True}))
            env.close()
            fake.replies.clear()  # close may skip a server that failed it just before
        assert not fake.replies
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        n_cases += 1
    assert n_cases >= 200
    # most generated answers are refused, a few are harmless and pass
    assert outcomes.get("RemoteEnvError", 0) > 150, outcomes


def _hostile_request(rng: np.random.Generator, sid: str, seq: int) -> tuple[str, str, object]:
    """(method, path, body) made from a valid request by generated changes."""
    odd = _odd_values(rng)
    valid = [
        ("POST", f"/v1/sessions/{sid}/step", {"seq": seq, "action": encode_array(np.int64(1))}),
        ("POST", f"/v1/sessions/{sid}/reset", {"seq": seq, "seed": 3, "options": {"a": 1}}),
        ("POST", "/v1/step", {"calls": [{"session": sid, "seq": seq, "action": {}}]}),
        ("POST", "/v1/sessions", {}),
    ]
    method, path, body = valid[int(rng.integers(len(valid)))]
    r = rng.random()
    if r < 0.75:
        for _ in range(int(rng.integers(1, 4))):
            body = _mutate(body, rng, odd)
        if not isinstance(body, dict) and rng.random() < 0.5:
            body = {"seq": seq, "action": body, "options": body}
    elif r < 0.85:
        raw = json.dumps(body).encode()
        body = raw[: int(rng.integers(len(raw)))] + bytes(rng.integers(0, 256, 8).tolist())
    else:
        path = path.replace(sid, quote(str(odd[int(rng.integers(len(odd)))])[:300], safe=""))
    return method, path, body


def test_generated_hostile_requests_get_a_4xx_and_the_server_keeps_serving():
    rng = np.random.default_rng(7)
    with EnvServer("CartPole-v1", max_body=1 << 16, max_sessions=16) as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=10) as c:
            sid = c.post("/v1/sessions").json()["session"]
            assert c.post(f"/v1/sessions/{sid}/reset", json={"seq": 1, "seed": 0}).is_success
            statuses: dict[int, int] = {}
            for case in range(260):
                seq = c.get(f"/v1/sessions/{sid}").json()["seq"] + 1  # valid cases move it on
                method, path, body = _hostile_request(rng, sid, seq)
                headers = {}
                if case % 10 == 9:  # a client id that is not one
                    headers["X-SNRL-Client"] = "bad id " + str(case)
                r = _send(c, method, path, body, headers=headers)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                assert r.status_code < 500, (method, path[:80], str(body)[:200], r.text[:300])
                if r.status_code == 200 and path == "/v1/sessions":  # created: close it again
                    c.delete(f"/v1/sessions/{r.json()['session']}")
            assert sum(statuses.values()) >= 200
            assert sum(v for k, v in statuses.items() if 400 <= k < 500) >= 150, statuses
        env = RemoteEnv(server.url, token=server.token)  # still serving
        ref = gym.make("CartPole-v1")
        np.testing.assert_array_equal(env.reset(seed=4)[0], ref.reset(seed=4)[0])
        for a in (0, 1, 1):
            np.testing.assert_array_equal(env.step(a)[0], ref.step(a)[0])
        env.close()

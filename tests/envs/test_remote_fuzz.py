"""Malformed requests to the env server: each gets a 4xx with a message, and afterwards the
server still serves a session correctly."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from snrl.envs.remote import RemoteEnv, encode_array  # noqa: E402
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

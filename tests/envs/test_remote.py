"""Remote envs (snrl.envs.remote, snrl.envs.remote_server): the wire codec, a client against
the reference server in a background thread, exactly-once steps, and the security rules."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from snrl.envs import make_env, make_vector_env
from snrl.envs.make import check_env_id_trusted
from snrl.envs.remote import (
    WireError,
    decode_array,
    decode_obs,
    decode_space,
    encode_array,
    encode_obs,
    encode_space,
)
from snrl.errors import EnvError, UserError

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from snrl.envs.remote import RemoteEnv, RemoteVectorEnv  # noqa: E402
from snrl.envs.remote_server import EnvServer  # noqa: E402


@pytest.fixture
def server():
    with EnvServer("CartPole-v1") as srv:
        yield srv


@pytest.fixture
def raw(server):
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=10
    ) as c:
        yield c


# ---- codec ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "arr",
    [
        np.array([1.5, -np.inf, np.nan, np.inf], dtype=np.float32),
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.array(True),
        np.array([2**63 - 1, -(2**63)], dtype=np.int64),
        np.array([2**64 - 1], dtype=np.uint64),
        np.random.default_rng(0).random((3, 40, 5)),  # > B64_MIN_SIZE: base64
        np.zeros((0, 3), dtype=np.uint8),
    ],
)
def test_array_round_trip_keeps_dtype_shape_and_values(arr):
    wire = json.loads(json.dumps(encode_array(arr), allow_nan=False))
    back = decode_array(wire)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(-np.inf, np.inf, (4,), np.float32),
        spaces.Box(np.array([0, -1]), np.array([3, 5]), dtype=np.int64),
        spaces.Discrete(5, start=-2),
        spaces.MultiDiscrete([3, 4, 2], start=[1, 0, -1]),
        spaces.MultiBinary(6),
        spaces.MultiBinary([2, 3]),
        spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0, 1, (2, 2))}),
        spaces.Tuple([spaces.Discrete(2), spaces.MultiBinary(3)]),
    ],
)
def test_space_round_trip_and_samples_cross_the_wire(space):
    back = decode_space(json.loads(json.dumps(encode_space(space), allow_nan=False)))
    assert back == space
    space.seed(0)
    for _ in range(5):
        x = space.sample()
        y = decode_obs(back, json.loads(json.dumps(encode_obs(space, x))))
        assert back.contains(y)
        np.testing.assert_equal(y, x)


def test_unsupported_space_is_a_user_error():
    with pytest.raises(UserError, match="cannot be served"):
        encode_space(spaces.Text(5))


@pytest.mark.parametrize(
    "obj, match",
    [
        ({"dtype": "object", "shape": [1], "data": [1]}, "dtype"),
        ({"dtype": "float32", "shape": [2], "data": [1.0]}, "needs 2"),
        ({"dtype": "int8", "shape": [1], "data": [300]}, "fit"),
        ({"dtype": "int8", "shape": [1], "data": [1.5]}, "not an integer"),
        ({"dtype": "float32", "shape": [1], "data": ["x"]}, "not a number"),
        ({"dtype": "float32", "shape": [-1], "data": []}, "integers >= 0"),
        ({"dtype": "float32", "shape": [1], "b64": "!!"}, "base64"),
        ({"dtype": "float32", "shape": [2], "b64": "AAAA"}, "needs 8"),
        ({"dtype": "uint8", "shape": [2**20, 2**20], "data": []}, "more than"),
        ([1, 2], "object"),
    ],
)
def test_bad_arrays_are_wire_errors(obj, match):
    with pytest.raises(WireError, match=match):
        decode_array(obj)


# ---- client and server ----------------------------------------------------------------------
def test_remote_env_matches_the_local_env_step_by_step(server):
    env = RemoteEnv(server.url, token=server.token)
    ref = gym.make("CartPole-v1")
    assert env.observation_space == ref.observation_space
    assert env.action_space == ref.action_space
    obs, _ = env.reset(seed=3)
    obs2, _ = ref.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(150):
        np.testing.assert_array_equal(obs, obs2)
        a = int(rng.integers(2))
        obs, r, te, tr, _ = env.step(a)
        obs2, r2, te2, tr2, _ = ref.step(a)
        assert (r, te, tr) == (r2, te2, tr2) and obs.dtype == np.float32
        if te or tr:
            obs, _ = env.reset()
            obs2, _ = ref.reset()
    counters = env.counters()
    assert counters["steps"] == 150 and counters["seq"] == 150 + counters["resets"]
    env.close()
    assert not server.app.sessions


def test_make_env_and_vector_env_take_a_url(server, monkeypatch):
    monkeypatch.setenv("SNRL_ENV_TOKEN", server.token)
    env = make_env(server.url + "/")
    assert isinstance(env, RemoteEnv)
    env.close()
    envs = make_vector_env(server.url, 3, seed=5)
    ref = make_vector_env("CartPole-v1", 3, seed=5)
    assert isinstance(envs, RemoteVectorEnv) and envs._remotes is not None
    np.testing.assert_array_equal(envs.reset()[0], ref.reset()[0])
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(80):
        a = rng.integers(0, 2, 3)
        out, want = envs.step(a), ref.step(a)
        for x, y in zip(out[:4], want[:4]):
            np.testing.assert_array_equal(x, y)
        if "final_obs" in want[4]:
            ended += 1
            mask = want[4]["_final_obs"]
            np.testing.assert_array_equal(out[4]["_final_obs"], mask)
            np.testing.assert_array_equal(
                np.stack(out[4]["final_obs"][mask]), np.stack(want[4]["final_obs"][mask])
            )
    assert ended > 0  # autoreset was exercised
    steps = [server.app.sessions[r.session].steps for r in envs._remotes]
    assert steps == [80, 80, 80]
    envs.close()
    assert not server.app.sessions


def test_a_repeated_seq_is_answered_from_the_cache_not_applied_twice(server, raw):
    sid = raw.post("/v1/sessions", json={}).json()["session"]
    raw.post(f"/v1/sessions/{sid}/reset", json={"seq": 1, "seed": 0})
    action = encode_array(np.int64(1))
    first = raw.post(f"/v1/sessions/{sid}/step", json={"seq": 2, "action": action})
    again = raw.post(f"/v1/sessions/{sid}/step", json={"seq": 2, "action": action})
    assert first.status_code == again.status_code == 200 and first.content == again.content
    assert raw.get(f"/v1/sessions/{sid}").json()["steps"] == 1
    skipped = raw.post(f"/v1/sessions/{sid}/step", json={"seq": 4, "action": action})
    assert skipped.status_code == 409 and "out of order" in skipped.json()["error"]
    batch = raw.post(
        "/v1/step",
        json={"calls": [{"session": sid, "seq": 3, "action": action}, {"session": "nope"}]},
    ).json()["results"]
    assert batch[0]["seq"] == 3 and batch[1]["status"] == 404
    assert raw.get(f"/v1/sessions/{sid}").json()["steps"] == 2


def test_seed_passes_through_reset(server):
    a = RemoteEnv(server.url, token=server.token)
    b = RemoteEnv(server.url, token=server.token)
    np.testing.assert_array_equal(a.reset(seed=7)[0], b.reset(seed=7)[0])
    assert not np.array_equal(a.reset(seed=8)[0], b.reset(seed=9)[0])
    a.close()
    b.close()


def test_every_request_needs_the_token(server):
    for headers in (
        {},
        {"Authorization": "Bearer " + "x" * len(server.token)},
        {"Authorization": server.token},
    ):
        r = httpx.get(server.url + "/v1/spaces", headers=headers, timeout=10)
        assert r.status_code == 401 and "token" in r.json()["error"]
    with pytest.raises(UserError, match="refused the token"):
        RemoteEnv(server.url, token="wrong-token-of-some-length")


def test_missing_token_is_a_user_error(server, monkeypatch):
    monkeypatch.delenv("SNRL_ENV_TOKEN", raising=False)
    with pytest.raises(UserError, match="SNRL_ENV_TOKEN"):
        RemoteEnv(server.url)


def test_calls_after_close_and_to_a_dead_server_fail_clearly(server):
    env = RemoteEnv(server.url, token=server.token, retries=1, backoff=0.01)
    env.reset(seed=0)
    env.close()
    with pytest.raises(UserError, match="closed"):
        env.step(0)
    env = RemoteEnv(server.url, token=server.token, retries=1, backoff=0.01)
    env.reset(seed=0)
    server.stop()
    with pytest.raises(EnvError, match="did not step: cannot connect.*--resume"):
        env.step(0)
    env.close()  # a server that is gone is not an error here


def test_url_from_a_file_must_be_this_machine():
    check_env_id_trusted("http://127.0.0.1:8765", source="checkpoint x")
    with pytest.raises(UserError, match="another machine"):
        check_env_id_trusted("http://203.0.113.5:8765", source="checkpoint x")


def test_server_refuses_bad_arguments():
    with pytest.raises(UserError, match="at least 16"):
        EnvServer("CartPole-v1", token="short")
    with pytest.raises(UserError, match="local env"):
        EnvServer("http://127.0.0.1:1", token="x" * 20)
    with pytest.raises(UserError, match="unknown env id"):
        EnvServer("NoSuchEnv-v0")


def test_gymnasium_env_checker_passes_and_client_options_are_checked(server):
    from gymnasium.utils.env_checker import check_env

    env = RemoteEnv(server.url, token=server.token, timeout=5.0)
    check_env(env, skip_render_check=True)
    assert env.render() is None  # no frames on the wire
    env.close()
    with pytest.raises(UserError, match=r"no options \['dt'\].*--env-kwargs"):
        make_env(server.url, token=server.token, dt=1)

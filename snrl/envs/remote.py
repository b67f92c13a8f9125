"""Environments over HTTP: the wire format and the client, :class:`RemoteEnv`.

The protocol (docs/remote.md is its specification) is JSON over HTTP. Every request carries
``Authorization: Bearer <token>``. Paths are relative to the env's URL (``http://host:port``
or ``http://host:port/some/prefix``):

* ``GET  v1/spaces`` -> ``{"protocol": 1, "env": ..., "observation_space": ...,
  "action_space": ...}``
* ``POST v1/sessions`` -> ``{"session": ID, ...the spaces}``: one env instance
* ``POST v1/sessions/ID/reset`` ``{"seq": k, "seed": int|null, "options": obj|null}``
  -> ``{"seq": k, "observation": ARRAY, "info": obj}``
* ``POST v1/sessions/ID/step`` ``{"seq": k, "action": ARRAY}`` -> ``{"seq": k,
  "observation": ARRAY, "reward": NUMBER, "terminated": bool, "truncated": bool, "info": obj}``
* ``GET  v1/sessions/ID`` -> the session's counters; ``DELETE v1/sessions/ID`` closes it.

``seq`` numbers the reset/step calls of one session from 1. The server applies call ``k``
once: the same ``k`` again (a retry after a lost response) gets the stored answer, any other
number a 409. That makes every call but session creation safe to retry.

An ARRAY is ``{"dtype": "float32", "shape": [4], "data": [flat, C order]}`` (a float element
may be the string ``"nan"``, ``"inf"`` or ``"-inf"``, which JSON has no numbers for) or, for
large arrays, ``{"dtype": ..., "shape": ..., "b64": base64 of the little-endian bytes}``.
Nothing on the wire is ever unpickled.

The codec (``encode_array`` ... ``decode_space``) has no dependency beyond numpy and
gymnasium, so the server (:mod:`snrl.envs.remote_server`) shares it; :class:`RemoteEnv`
imports httpx (the ``[remote]`` extra) when it is built.
"""

from __future__ import annotations

import base64
import math
import os
import socket
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from snrl.errors import EnvError, UserError

__all__ = [
    "PROTOCOL",
    "RemoteEnv",
    "RemoteVectorEnv",
    "TOKEN_ENV_VAR",
    "WireError",
    "check_url_trusted",
    "decode_array",
    "decode_space",
    "decode_value",
    "encode_array",
    "encode_space",
    "encode_value",
    "is_remote_env",
]

#: Version of the wire protocol (the ``v1/`` of every path).
PROTOCOL = 1
#: The environment variable RemoteEnv reads its token from when none is passed.
TOKEN_ENV_VAR = "SNRL_ENV_TOKEN"
#: dtypes allowed on the wire (numpy names).
DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
#: Arrays with more elements than this are sent as base64 bytes instead of a JSON list.
B64_MIN_SIZE = 256
#: Most elements of one array on the wire; most dimensions; deepest nesting of a value.
MAX_ELEMENTS = 2**26
MAX_DIMS = 32
MAX_DEPTH = 16
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class WireError(ValueError):
    """A message that does not follow the protocol (the server answers it with a 4xx)."""


def is_remote_env(env: object) -> bool:
    """Whether ``env`` is an env URL (``http://`` or ``https://``)."""
    return isinstance(env, str) and env.startswith(("http://", "https://"))


def check_url_trusted(url: str, *, source: str) -> None:
    """Refuse an env URL read from a file (a checkpoint, a run's config) unless it names this
    machine: the client sends the token of ``SNRL_ENV_TOKEN`` to the URL, and a run
    directory someone sent you could name their server.

    Raises:
        UserError: A URL whose host is not a loopback address.
    """
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    if host in ("127.0.0.1", "localhost", "::1"):
        return
    raise UserError(
        f"{source} names the env server {_redact(url)!r} on another machine; snrl does not "
        f"send your {TOKEN_ENV_VAR} to a server named by a file (name it yourself with "
        f"--env {_redact(url)}; in Python: load(..., env=...))"
    )


# ---- arrays ---------------------------------------------------------------------------------
def _float_out(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def encode_array(a: Any) -> dict[str, Any]:
    """``a`` (array-like) as an ARRAY object (dtype, shape, and data or b64)."""
    arr = np.asarray(a)
    name = arr.dtype.name
    if name not in DTYPES:
        raise WireError(f"dtype {arr.dtype} cannot go on the wire (use one of {DTYPES})")
    out: dict[str, Any] = {"dtype": name, "shape": list(arr.shape)}
    if arr.size > B64_MIN_SIZE:
        le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        out["b64"] = base64.b64encode(np.ascontiguousarray(le).tobytes()).decode("ascii")
    elif arr.dtype.kind == "f":
        out["data"] = [_float_out(x) for x in arr.ravel().tolist()]
    else:
        out["data"] = arr.ravel().tolist()
    return out


def _shape(obj: Any) -> tuple[int, ...]:
    shape = obj.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise WireError(f"array shape must be a list of at most {MAX_DIMS} integers")
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise WireError(f"array shape {shape} must hold integers >= 0")
    if math.prod(shape) > MAX_ELEMENTS:
        raise WireError(f"array shape {shape} has more than {MAX_ELEMENTS} elements")
    return tuple(shape)


def _element(x: Any, kind: str) -> Any:
    if kind == "f":
        if isinstance(x, str) and x in _NONFINITE:
            return _NONFINITE[x]
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise WireError(f"float array element {x!r} is not a number")
        return x
    if kind == "b":
        if not isinstance(x, bool):
            raise WireError(f"bool array element {x!r} is not true/false")
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise WireError(f"integer array element {x!r} is not an integer")
    return x


def decode_array(obj: Any) -> np.ndarray:
    """An ARRAY object back to a numpy array of its dtype and shape.

    Raises:
        WireError: Not an ARRAY object, an unknown dtype, a bad shape, data that does not fit
            the dtype or the shape.
    """
    if not isinstance(obj, dict) or "dtype" not in obj or "shape" not in obj:
        raise WireError("an array must be an object with dtype, shape and data (or b64)")
    name = obj["dtype"]
    if name not in DTYPES:
        raise WireError(f"array dtype {name!r} is not one of {', '.join(DTYPES)}")
    dtype = np.dtype(name)
    shape = _shape(obj)
    size = math.prod(shape)
    if "b64" in obj:
        raw = obj["b64"]
        if not isinstance(raw, str):
            raise WireError("array b64 must be a string")
        try:
            buf = base64.b64decode(raw.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise WireError("array b64 is not valid base64") from None
        if len(buf) != size * dtype.itemsize:
            raise WireError(
                f"array b64 holds {len(buf)} bytes, shape {list(shape)} of {name} needs "
                f"{size * dtype.itemsize}"
            )
        return np.frombuffer(buf, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    data = obj.get("data")
    if not isinstance(data, list):
        raise WireError("array data must be a flat list (or give b64)")
    if len(data) != size:
        raise WireError(f"array data has {len(data)} elements, shape {list(shape)} needs {size}")
    values = [_element(x, dtype.kind) for x in data]
    try:
        with np.errstate(all="ignore"):
            arr = np.array(values, dtype=dtype)
    except (OverflowError, ValueError):
        raise WireError(f"array data does not fit dtype {name}") from None
    if dtype.kind in "iu" and any(int(a) != v for a, v in zip(arr.tolist(), values)):
        raise WireError(f"array data does not fit dtype {name}")
    return arr.reshape(shape)


# ---- values of info dicts -------------------------------------------------------------------
def encode_value(v: Any, depth: int = 0) -> Any:
    """An info value as JSON: numbers, strings, bools, None, lists and str-keyed dicts as
    they are; numpy arrays as ``{"ndarray": ARRAY}``; anything else is left out (None)."""
    if depth > MAX_DEPTH:
        return None
    if v is None or isinstance(v, (bool, str, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"ndarray": encode_array(np.float64(v))}
    if isinstance(v, (np.ndarray, np.generic)):
        try:
            return {"ndarray": encode_array(v)}
        except WireError:
            return None
    if isinstance(v, dict):
        return {str(k): encode_value(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [encode_value(x, depth + 1) for x in v]
    return None


def decode_value(v: Any, depth: int = 0) -> Any:
    """The inverse of :func:`encode_value` (``{"ndarray": ARRAY}`` becomes an array; a
    0-d one a numpy scalar)."""
    if depth > MAX_DEPTH:
        raise WireError(f"value nested deeper than {MAX_DEPTH}")
    if isinstance(v, dict):
        if set(v) == {"ndarray"}:
            arr = decode_array(v["ndarray"])
            return arr[()] if arr.ndim == 0 else arr
        return {k: decode_value(x, depth + 1) for k, x in v.items()}
    if isinstance(v, list):
        return [decode_value(x, depth + 1) for x in v]
    return v


# ---- spaces ---------------------------------------------------------------------------------
def encode_space(space: spaces.Space) -> dict[str, Any]:
    """A gymnasium space as JSON: Box, Discrete, MultiDiscrete, MultiBinary, and Dict and
    Tuple of those.

    Raises:
        UserError: Another kind of space.
    """
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": encode_array(space.low),
            "high": encode_array(space.high),
            "shape": list(space.shape),
            "dtype": space.dtype.name,
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": encode_array(space.nvec),
            "start": encode_array(space.start),
            "dtype": space.dtype.name,
        }
    if isinstance(space, spaces.MultiBinary):
        n = space.n
        return {"type": "MultiBinary", "n": int(n) if np.ndim(n) == 0 else [int(x) for x in n]}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: encode_space(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [encode_space(s) for s in space.spaces]}
    raise UserError(
        f"the space {type(space).__name__} cannot be served over HTTP (snrl serves Box, "
        "Discrete, MultiDiscrete, MultiBinary, and Dict/Tuple of them; wrap the env)"
    )


def _int(obj: dict, key: str) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise WireError(f"space field {key!r} must be an integer, got {v!r}")
    return v


def decode_space(obj: Any, depth: int = 0) -> spaces.Space:
    """The inverse of :func:`encode_space`.

    Raises:
        WireError: An unknown type or fields that do not make that space.
    """
    if depth > MAX_DEPTH or not isinstance(obj, dict):
        raise WireError("a space must be an object with a type")
    kind = obj.get("type")
    try:
        if kind == "Box":
            dtype = obj.get("dtype")
            if dtype not in DTYPES:
                raise WireError(f"Box dtype {dtype!r} is not one of {', '.join(DTYPES)}")
            low, high = decode_array(obj.get("low")), decode_array(obj.get("high"))
            return spaces.Box(low=low, high=high, shape=_shape(obj), dtype=np.dtype(dtype))
        if kind == "Discrete":
            return spaces.Discrete(_int(obj, "n"), start=_int(obj, "start"))
        if kind == "MultiDiscrete":
            dtype = obj.get("dtype", "int64")
            if dtype not in DTYPES:
                raise WireError(f"MultiDiscrete dtype {dtype!r} is not one of {DTYPES}")
            nvec, start = decode_array(obj.get("nvec")), decode_array(obj.get("start"))
            return spaces.MultiDiscrete(nvec, dtype=np.dtype(dtype), start=start)
        if kind == "MultiBinary":
            n = obj.get("n")
            if isinstance(n, list):
                return spaces.MultiBinary([int(_int({"n": x}, "n")) for x in n])
            return spaces.MultiBinary(_int(obj, "n"))
        if kind == "Dict":
            subs = obj.get("spaces")
            if not isinstance(subs, dict):
                raise WireError("Dict space needs an object of spaces")
            return spaces.Dict({k: decode_space(s, depth + 1) for k, s in subs.items()})
        if kind == "Tuple":
            subs = obj.get("spaces")
            if not isinstance(subs, list):
                raise WireError("Tuple space needs a list of spaces")
            return spaces.Tuple([decode_space(s, depth + 1) for s in subs])
    except WireError:
        raise
    except (ValueError, TypeError, AssertionError) as e:
        raise WireError(f"{kind} space: {e}") from None
    raise WireError(f"unknown space type {kind!r}")


def encode_obs(space: spaces.Space, obs: Any) -> Any:
    """An observation (or action) of ``space`` as JSON: an ARRAY, or an object / list of them
    for Dict / Tuple spaces."""
    if isinstance(space, spaces.Dict):
        return {k: encode_obs(s, obs[k]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [encode_obs(s, o) for s, o in zip(space.spaces, obs)]
    return encode_array(obs)


def decode_obs(space: spaces.Space, obj: Any) -> Any:
    """The inverse of :func:`encode_obs`; checks the structure, shape and dtype kind against
    ``space`` and casts to its dtype (a Discrete value becomes an ``int64`` scalar).

    Raises:
        WireError: A value whose structure, shape or dtype does not fit ``space``.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(obj, dict) or set(obj) != set(space.spaces):
            raise WireError(f"expected an object with keys {sorted(space.spaces)}")
        return {k: decode_obs(s, obj[k]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(obj, list) or len(obj) != len(space.spaces):
            raise WireError(f"expected a list of {len(space.spaces)} values")
        return tuple(decode_obs(s, o) for s, o in zip(space.spaces, obj))
    arr = decode_array(obj)
    shape = () if isinstance(space, spaces.Discrete) else space.shape
    if arr.shape != shape:
        raise WireError(f"shape {list(arr.shape)} does not fit the space's shape {list(shape)}")
    want = np.dtype(np.int64) if isinstance(space, spaces.Discrete) else space.dtype
    fits = {"b": "b", "i": "iu", "u": "iu", "f": "iuf"}.get(want.kind, "")
    if arr.dtype.kind not in fits:
        raise WireError(f"dtype {arr.dtype} does not fit the space's dtype {want}")
    out = arr.astype(want)
    if want.kind in "iu" and not np.array_equal(out, arr):
        raise WireError(f"values {arr.tolist()} do not fit the space's dtype {want}")
    return out[()] if isinstance(space, spaces.Discrete) else out


# ---- the client -----------------------------------------------------------------------------
def _redact(url: str) -> str:
    return url.split("?", 1)[0]


class RemoteEnv(gym.Env):
    """A gymnasium env whose ``reset``/``step`` run on an snrl env server (``snrl serve-env``
    or any server that speaks the protocol of docs/remote.md). Its spaces come from the
    server; each RemoteEnv is one session there.

    Calls time out after ``timeout`` seconds. Calls that cannot change the server twice
    (spaces, reset and step, which carry a sequence number, close) are retried up to
    ``retries`` times with a growing pause; creating the session is retried only when the
    connection failed before the request was sent. When the server stays unreachable the
    call raises :class:`snrl.errors.EnvError`, so training stops with one ``error:`` line and
    ``checkpoints/last.pt`` kept (continue with ``snrl train --out DIR --resume`` once the
    server is back).

    Built by :func:`snrl.make_env` for an ``http://`` / ``https://`` env id, with the config's
    ``env_kwargs`` as its keyword arguments (the client's options below).

    Args:
        url: The server's base URL, ``http://host:port`` (a path prefix is allowed).
        token: The server's token; default the ``SNRL_ENV_TOKEN`` environment variable.
        timeout: Seconds a call may take (connect and answer).
        retries: Retries of a call that failed on the network.
        backoff: Seconds before the first retry; doubled for each later one (at most 2 s).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.1,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise UserError(
                f"a remote env takes no options {sorted(unknown)} (its env_kwargs are the "
                "client's: timeout, retries, backoff; options of the env itself are the "
                "server's: snrl serve-env ... --env-kwargs JSON)"
            )
        if not is_remote_env(url):
            raise UserError(f"env URL {url!r} must start with http:// or https://")
        try:
            import httpx
        except ImportError:
            raise UserError(
                "remote envs need the [remote] extra (pip install 'snrl[remote]')"
            ) from None
        if token is None:
            token = os.environ.get(TOKEN_ENV_VAR)
        if not token:
            raise UserError(
                f"the env server {_redact(url)} needs its token (set {TOKEN_ENV_VAR}=<the "
                "token `snrl serve-env` printed>, or pass RemoteEnv(url, token=...))"
            )
        if not (timeout > 0 and isinstance(retries, int) and retries >= 0 and backoff >= 0):
            raise UserError(
                f"timeout={timeout!r}, retries={retries!r}, backoff={backoff!r} (need "
                "timeout > 0 s, an integer retries >= 0, backoff >= 0 s)"
            )
        self.url = _redact(url).rstrip("/")
        self.retries, self.backoff = retries, backoff
        self._httpx = httpx
        # TCP_NODELAY: httpx writes the headers and the body of a request separately, and
        # without it Nagle's algorithm holds the body until the server's delayed ACK (40 ms).
        nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        self._client = httpx.Client(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout),
            transport=httpx.HTTPTransport(retries=0, socket_options=nodelay),
            trust_env=False,  # no proxies from the environment: the token goes to url only
        )
        self._seq = 0
        self._prefetched: dict[str, Any] | None = None
        self.session: str | None = None
        try:
            created = self._call(
                "POST", "v1/sessions", {}, idempotent=False, what="create a session"
            )
        except BaseException:
            self._client.close()
            raise
        try:
            self.observation_space = decode_space(created["observation_space"])
            self.action_space = decode_space(created["action_space"])
            self.session = str(created["session"])
            self.remote_env_id = str(created.get("env", ""))
        except (WireError, KeyError, TypeError) as e:
            self._client.close()
            raise EnvError(
                f"env server {self.url} answered the session request with something that is "
                f"not the snrl protocol: {e} (check the URL and the server's version)"
            ) from None

    # -- transport --------------------------------------------------------------------------
    def _fail(self, what: str, reason: str) -> EnvError:
        return EnvError(
            f"env server {self.url} did not {what}: {reason} (check that the server is "
            "running; a training run keeps checkpoints/last.pt: continue it with "
            "`snrl train --out DIR --resume` once the server is back)"
        )

    def _call(
        self, method: str, path: str, body: Any, *, idempotent: bool, what: str
    ) -> dict[str, Any]:
        httpx = self._httpx
        attempt = 0
        while True:
            try:
                r = self._client.request(method, f"{self.url}/{path}", json=body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                reason = f"cannot connect ({type(e).__name__})"
            except httpx.TransportError as e:  # sent, perhaps applied: retry only if safe
                reason = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                if not idempotent:
                    raise self._fail(what, reason) from None
            else:
                return self._answer(r, what)
            attempt += 1
            if attempt > self.retries:
                raise self._fail(what, f"{reason}, after {self.retries} retries")
            time.sleep(min(self.backoff * 2 ** (attempt - 1), 2.0))

    def _answer(self, r: Any, what: str) -> dict[str, Any]:
        try:
            body = r.json()
        except ValueError:
            body = None
        if r.status_code >= 400:
            msg = body.get("error") if isinstance(body, dict) else None
            msg = " ".join(str(msg or r.text[:200] or r.reason_phrase).split())
            if r.status_code == 401:
                raise UserError(
                    f"env server {self.url} refused the token: {msg} (set {TOKEN_ENV_VAR} to "
                    "the token `snrl serve-env` printed)"
                )
            raise EnvError(f"env server {self.url} could not {what}: HTTP {r.status_code}: {msg}")
        if not isinstance(body, dict):
            raise EnvError(
                f"env server {self.url} answered {what} with something that is not a JSON "
                "object (is it an snrl env server?)"
            )
        return body

    def _session_call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.session is None:
            raise UserError(f"the remote env {self.url} is closed (make a new one)")
        self._seq += 1
        body = {"seq": self._seq, **body}
        out = self._call("POST", f"v1/sessions/{self.session}/{op}", body, idempotent=True, what=op)
        if out.get("seq") != self._seq:
            raise EnvError(
                f"env server {self.url} answered {op} {self._seq} with seq {out.get('seq')!r} "
                "(the server does not follow the protocol)"
            )
        return out

    # -- gymnasium --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):  # noqa: D102
        super().reset(seed=seed)
        out = self._session_call("reset", {"seed": seed, "options": encode_value(options)})
        try:
            obs = decode_obs(self.observation_space, out["observation"])
            info = decode_value(out.get("info") or {})
        except (WireError, KeyError) as e:
            raise EnvError(f"env server {self.url} sent a bad reset answer: {e}") from None
        return obs, info

    def _prepare_step(self, action: Any) -> dict[str, Any]:
        """The next step call of this session (its seq taken), for a batched request."""
        if self.session is None:
            raise UserError(f"the remote env {self.url} is closed (make a new one)")
        try:
            wire_action = encode_obs(self.action_space, action)
        except WireError as e:
            raise UserError(f"action {action!r} cannot be sent: {e}") from None
        self._seq += 1
        return {"session": self.session, "seq": self._seq, "action": wire_action}

    def step(self, action: Any):  # noqa: D102
        out, self._prefetched = self._prefetched, None
        if out is None:  # not stepped by RemoteVectorEnv's batched request
            call = self._prepare_step(action)
            out = self._call(
                "POST",
                f"v1/sessions/{self.session}/step",
                {"seq": call["seq"], "action": call["action"]},
                idempotent=True,
                what="step",
            )
        if "error" in out:
            raise EnvError(
                f"env server {self.url} could not step: HTTP {out.get('status')}: "
                f"{' '.join(str(out['error']).split())}"
            )
        if out.get("seq") != self._seq:
            raise EnvError(
                f"env server {self.url} answered step {self._seq} with seq {out.get('seq')!r} "
                "(the server does not follow the protocol)"
            )
        try:
            obs = decode_obs(self.observation_space, out["observation"])
            reward = out["reward"]
            reward = _NONFINITE[reward] if isinstance(reward, str) else float(reward)
            terminated, truncated = out["terminated"], out["truncated"]
            if not isinstance(terminated, bool) or not isinstance(truncated, bool):
                raise WireError("terminated and truncated must be true/false")
            info = decode_value(out.get("info") or {})
        except (WireError, KeyError, TypeError, ValueError) as e:
            raise EnvError(f"env server {self.url} sent a bad step answer: {e}") from None
        return obs, reward, terminated, truncated, info

    def render(self) -> None:
        """No frames come over the wire (protocol 1): always None."""
        return None

    def counters(self) -> dict[str, Any]:
        """The server's counters of this session (``seq``, ``steps``, ``resets``)."""
        if self.session is None:
            raise UserError(f"the remote env {self.url} is closed (make a new one)")
        return self._call(
            "GET", f"v1/sessions/{self.session}", None, idempotent=True, what="report counters"
        )

    def close(self) -> None:
        """End the session on the server (once; a server that is gone is not an error)."""
        session, self.session = self.session, None
        if session is not None:
            try:
                self._client.delete(f"{self.url}/v1/sessions/{session}", timeout=2.0)
            except self._httpx.HTTPError:
                pass
            self._client.close()
        super().close()


class RemoteVectorEnv(gym.vector.SyncVectorEnv):
    """A ``SyncVectorEnv`` of :class:`RemoteEnv` sub-envs (each in any wrappers that pass
    actions through unchanged) that steps all of them in one request (``POST v1/step``)
    instead of one request per sub-env; resets, and everything else, are those of
    ``SyncVectorEnv``. Only ``SAME_STEP`` autoreset (what :func:`snrl.make_vector_env`
    builds): there every sub-env is stepped at every vector step.

    Sub-envs on different servers, or a server without ``v1/step`` (HTTP 404), are stepped
    one request each.
    """

    def __init__(self, env_fns: Any, **kwargs: Any) -> None:
        super().__init__(env_fns, **kwargs)
        if self.autoreset_mode != gym.vector.AutoresetMode.SAME_STEP:
            raise ValueError("RemoteVectorEnv needs autoreset_mode=AutoresetMode.SAME_STEP")
        remotes = [e.unwrapped for e in self.envs]
        same = all(isinstance(r, RemoteEnv) and r.url == remotes[0].url for r in remotes)
        self._remotes: list[RemoteEnv] | None = remotes if same and len(remotes) > 1 else None

    def step(self, actions: Any):  # noqa: D102
        if self._remotes is not None:
            remotes = self._remotes
            acts = list(gym.vector.utils.iterate(self.action_space, actions))
            calls = [r._prepare_step(a) for r, a in zip(remotes, acts)]
            try:
                out = remotes[0]._call(
                    "POST", "v1/step", {"calls": calls}, idempotent=True, what="step"
                )
            except EnvError as e:
                if "HTTP 404" not in str(e):
                    raise
                self._remotes = None  # a server without the batch endpoint
                for r in remotes:
                    r._seq -= 1
                return super().step(actions)
            results = out.get("results")
            if not isinstance(results, list) or len(results) != len(remotes):
                raise EnvError(
                    f"env server {remotes[0].url} answered {len(remotes)} steps with "
                    "something else (the server does not follow the protocol)"
                )
            for r, res in zip(remotes, results):
                r._prefetched = res if isinstance(res, dict) else {"error": repr(res)}
        return super().step(actions)

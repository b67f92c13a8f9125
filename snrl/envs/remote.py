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
import functools
import json
import math
import os
import re
import secrets
import socket
import time
import weakref
import zlib
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from snrl.errors import EnvError, UserError, printable, server_message

__all__ = [
    "PROTOCOL",
    "MAX_REPLY",
    "RemoteEnv",
    "RemoteEnvError",
    "RemoteVectorEnv",
    "TOKEN_ENV_VAR",
    "WireError",
    "check_url",
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


def _cut(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for a message: printable characters only, at most ``limit`` of them
    (what a peer sent can be long, or hold terminal escapes)."""
    return printable(repr(value), limit)


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
        raise WireError(
            f"array shape must be a list of at most {MAX_DIMS} integers, got {_cut(shape)}"
        )
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise WireError(f"array shape {_cut(shape)} must hold integers >= 0")
        if d > MAX_ELEMENTS:  # also when another dimension is 0: numpy refuses huge ones
            raise WireError(f"array shape {_cut(shape)} has a dimension over {MAX_ELEMENTS}")
    if math.prod(shape) > MAX_ELEMENTS:
        raise WireError(f"array shape {shape} has more than {MAX_ELEMENTS} elements")
    return tuple(shape)


def _element(x: Any, kind: str) -> Any:
    if kind == "f":
        if isinstance(x, str) and x in _NONFINITE:
            return _NONFINITE[x]
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise WireError(f"float array element {_cut(x)} is not a number")
        return x
    if kind == "b":
        if not isinstance(x, bool):
            raise WireError(f"bool array element {_cut(x)} is not true/false")
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise WireError(f"integer array element {_cut(x)} is not an integer")
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
        raise WireError(f"array dtype {_cut(name)} is not one of {', '.join(DTYPES)}")
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


def _int(obj: dict, key: str, low: int = -(2**63), high: int = 2**63 - 1) -> int:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise WireError(f"space field {key!r} must be an integer, got {_cut(v)}")
    if not low <= v <= high:
        raise WireError(f"space field {key!r} is {_cut(v)}, outside [{low}, {high}]")
    return v


def _dtype_field(obj: dict, default: str | None = None) -> np.dtype:
    name = obj.get("dtype", default)
    if name not in DTYPES:
        raise WireError(f"space field 'dtype' is {_cut(name)}, not one of {', '.join(DTYPES)}")
    return np.dtype(name)


def decode_space(obj: Any, depth: int = 0) -> spaces.Space:
    """The inverse of :func:`encode_space`. Every field is checked: integers fit int64, a
    Box's ``low`` and ``high`` have its full ``shape`` (so a space never holds more elements
    than the message that described it), a MultiBinary has at most ``MAX_ELEMENTS``.

    Raises:
        WireError: An unknown type or fields that do not make that space, naming the field.
    """
    if depth > MAX_DEPTH or not isinstance(obj, dict):
        raise WireError(f"a space must be an object with a type (nested at most {MAX_DEPTH})")
    kind = obj.get("type")
    try:
        if kind == "Box":
            dtype = _dtype_field(obj)
            shape = _shape(obj)
            low, high = decode_array(obj.get("low")), decode_array(obj.get("high"))
            if low.shape != shape or high.shape != shape:
                raise WireError(
                    f"Box low {list(low.shape)} and high {list(high.shape)} must have the "
                    f"space's shape {list(shape)}"
                )
            return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
        if kind == "Discrete":
            n = _int(obj, "n", 1)
            start = _int(obj, "start")
            if start + n - 1 > 2**63 - 1:
                raise WireError(f"Discrete start {start} + n {n} does not fit int64")
            return spaces.Discrete(n, start=start)
        if kind == "MultiDiscrete":
            dtype = _dtype_field(obj, "int64")
            nvec, start = decode_array(obj.get("nvec")), decode_array(obj.get("start"))
            if nvec.shape != start.shape or nvec.dtype.kind not in "iu":
                raise WireError("MultiDiscrete nvec and start must be integer arrays of one shape")
            return spaces.MultiDiscrete(nvec, dtype=dtype, start=start)
        if kind == "MultiBinary":
            n = obj.get("n")
            if isinstance(n, list):
                if not 1 <= len(n) <= MAX_DIMS:
                    raise WireError(f"MultiBinary n must be 1 to {MAX_DIMS} integers")
                dims = [_int({"n": x}, "n", 1, MAX_ELEMENTS) for x in n]
                if math.prod(dims) > MAX_ELEMENTS:
                    raise WireError(f"MultiBinary n {dims} has more than {MAX_ELEMENTS} elements")
                return spaces.MultiBinary(dims)
            return spaces.MultiBinary(_int(obj, "n", 1, MAX_ELEMENTS))
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
    except (ValueError, TypeError, AssertionError, OverflowError, KeyError) as e:
        raise WireError(f"{_cut(kind)} space: {_cut(str(e), 200)}") from None
    raise WireError(f"unknown space type {_cut(kind)}")


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
#: Most bytes of one answer, after any Content-Encoding is undone (64 MiB).
MAX_REPLY = 1 << 26
#: The header that names the calling process to the server (its per-client session count).
CLIENT_HEADER = "X-SNRL-Client"
#: One id per process: all the sessions of one training run count as one client.
_CLIENT_ID = secrets.token_hex(8)
_SESSION_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")


class RemoteEnvError(EnvError):
    """An env server refused a call, could not be reached, or answered outside the protocol.

    Attributes:
        status: The HTTP status of a refusal (4xx/5xx), or None when the server did not answer
            or answered something that is not the protocol.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _redact(url: str) -> str:
    return url.split("?", 1)[0]


def check_url(url: object) -> str:
    """``url`` checked as an env server's URL; returns it without query and final ``/``.

    Raises:
        UserError: Not a string, not ``http(s)://host[:port][/prefix]``, spaces or control or
            non-ASCII characters, a port that is not a number in [1, 65535], no host.
    """
    fix = "write it as http://HOST:PORT, e.g. http://127.0.0.1:8765"
    if not isinstance(url, str) or not is_remote_env(url):
        raise UserError(f"env URL {_cut(url)} must start with http:// or https:// ({fix})")
    if not url.isascii():
        raise UserError(
            f"env URL {_cut(url)} holds non-ASCII characters ({fix}; a host name with "
            "non-ASCII letters in its punycode form, xn--...)"
        )
    if any(c.isspace() or not c.isprintable() for c in url):
        raise UserError(f"env URL {_cut(url)} holds a space or a control character ({fix})")
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise UserError(f"env URL {_cut(url)} does not parse: {e} ({fix})") from None
    if not parts.hostname:
        raise UserError(f"env URL {_cut(url)} names no host ({fix})")
    if port == 0:
        raise UserError(f"env URL {_cut(url)} has port 0 ({fix})")
    return _redact(url).rstrip("/")


def _check_options(timeout: Any, retries: Any, backoff: Any) -> None:
    def number(name: str, v: Any, low: float, high: float, open_low: bool) -> None:
        ok = not isinstance(v, bool) and isinstance(v, (int, float))
        if ok:
            ok = math.isfinite(v) and (v > low if open_low else v >= low) and v <= high
        if not ok:
            side = ">" if open_low else ">="
            raise UserError(
                f"remote env option {name}={_cut(v)} (need a number {side} {low:g} and <= "
                f"{high:g}, in seconds, e.g. --env-kwargs '{{\"{name}\": 30}}')"
            )

    number("timeout", timeout, 0.0, 86400.0, True)
    number("backoff", backoff, 0.0, 60.0, False)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
        raise UserError(
            f"remote env option retries={_cut(retries)} (need an integer in [0, 100], "
            "e.g. --env-kwargs '{\"retries\": 5}')"
        )


class _Deadline:
    """The end of the call in flight (``time.monotonic`` seconds); None outside a call."""

    def __init__(self) -> None:
        self.at: float | None = None

    def bound(self, timeout: float | None, exc: type[Exception]) -> float | None:
        """``timeout`` cut to the time left; raises ``exc`` when none is left."""
        if self.at is None:
            return timeout
        left = self.at - time.monotonic()
        if left <= 0:
            raise exc("the call's deadline passed")
        return left if timeout is None else min(timeout, left)


def _deadline_backend(inner: Any, deadline: _Deadline) -> Any:
    """httpcore's network backend with every connect, read and write cut to ``deadline``.

    httpx's timeouts bound each socket operation, so a server that sends one byte every few
    seconds would hold a call forever; httpx has no option for a total time, and this is
    the layer where every wait of a call passes.
    """
    import httpcore

    class Stream(httpcore.NetworkStream):
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._stream.read(max_bytes, deadline.bound(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._stream.write(buffer, deadline.bound(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self._stream.close()

        def start_tls(self, ssl_context: Any, server_hostname: Any = None, timeout: Any = None):
            t = deadline.bound(timeout, httpcore.ConnectTimeout)
            return Stream(self._stream.start_tls(ssl_context, server_hostname, t))

        def get_extra_info(self, info: str) -> Any:
            return self._stream.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            t = deadline.bound(timeout, httpcore.ConnectTimeout)
            return Stream(inner.connect_tcp(host, port, t, local_address, socket_options))

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            t = deadline.bound(timeout, httpcore.ConnectTimeout)
            return Stream(inner.connect_unix_socket(path, t, socket_options))

        def sleep(self, seconds: float) -> None:
            inner.sleep(seconds)

    return Backend()


@functools.lru_cache(maxsize=1)
def _tls_context() -> Any:
    """httpx's default TLS context (certificates verified), made once per process: making
    it costs tens of milliseconds, for each of ``n_envs`` clients otherwise."""
    import httpx

    return httpx.create_ssl_context()


def _json_reply(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    raise WireError(f'{name} is not valid JSON (send non-finite floats as "nan"/"inf")')


def _decoder(encoding: str) -> Any:
    """A function undoing ``encoding`` chunk by chunk with a cap on its output, or None for
    identity. zlib's ``max_length`` bounds each chunk's output, so a small compressed answer
    cannot inflate past the cap in memory (a "zip bomb")."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return None
    if enc not in ("gzip", "x-gzip", "deflate"):
        raise WireError(f"Content-Encoding {_cut(encoding)} (snrl reads identity, gzip, deflate)")
    inflate = zlib.decompressobj(31 if "gzip" in enc else 15)

    def feed(chunk: bytes, room: int) -> bytes:
        try:
            out = inflate.decompress(chunk, room + 1)
        except zlib.error as e:
            raise WireError(f"the {enc} answer does not decompress: {e}") from None
        return out

    return feed


def _reward(v: Any) -> float:
    if isinstance(v, str):
        if v in _NONFINITE:
            return _NONFINITE[v]
    elif not isinstance(v, bool) and isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:
            pass
    raise WireError(f'field \'reward\' must be a number (or "nan", "inf", "-inf"), got {_cut(v)}')


def _info(out: dict[str, Any]) -> dict[str, Any]:
    info = out.get("info")
    if info is None:
        return {}
    if not isinstance(info, dict):
        raise WireError(f"field 'info' must be an object, got {type(info).__name__}")
    try:
        return decode_value(info)
    except WireError as e:
        raise WireError(f"field 'info': {e}") from None


def _field(out: dict[str, Any], key: str) -> Any:
    if key not in out:
        raise WireError(f"field {key!r} is missing")
    return out[key]


#: Servers a session could not be ended on, and when (``time.monotonic()``): for 10 s more,
#: closing another session there does not wait for it (64 envs closing at the exit of a run
#: whose server is gone would wait 2 s each).
_UNREACHABLE: dict[str, float] = {}


def _end_session(client: Any, deadline: _Deadline, url: str, session: str, timeout: float):
    """``DELETE`` a session (within 2 s at most) and close the client's connection."""
    import httpx

    if time.monotonic() - _UNREACHABLE.get(url, -math.inf) > 10.0:
        deadline.at = time.monotonic() + min(timeout, 2.0)
        try:
            client.delete(f"{url}/v1/sessions/{session}")
        except httpx.HTTPError:
            _UNREACHABLE[url] = time.monotonic()
        finally:
            deadline.at = None
    client.close()


class RemoteEnv(gym.Env):
    """A gymnasium env whose ``reset``/``step`` run on an snrl env server (``snrl serve-env``
    or any server that speaks the protocol of docs/remote.md). Its spaces come from the
    server; each RemoteEnv is one session there.

    Each attempt of a call ends after ``timeout`` seconds in all, however the server sends
    its answer (a server that sends one byte every few seconds is cut off too); an answer
    over ``MAX_REPLY`` bytes (after decompression) is refused; every field of every answer
    is checked (spaces, shapes, dtypes, the reward, the flags, ``info``), and anything that
    is not the protocol raises :class:`RemoteEnvError` naming the field. Calls that cannot
    change the server twice (spaces, reset and step, which carry a sequence number, close)
    are retried up to ``retries`` times with a growing pause; creating the session is
    retried only when the connection failed before the request was sent. A call the server
    refused (a 4xx, or the env raised: 500) was not applied, so the session stays usable.
    When the server stays unreachable the call raises :class:`RemoteEnvError` (an
    :class:`snrl.errors.EnvError`), so training stops with one ``error:`` line and
    ``checkpoints/last.pt`` kept (continue with ``snrl train --out DIR --resume`` once the
    server is back).

    Built by :func:`snrl.make_env` for an ``http://`` / ``https://`` env id, with the config's
    ``env_kwargs`` as its keyword arguments (the client's options below).

    Args:
        url: The server's base URL, ``http://host:port`` (a path prefix is allowed).
        token: The server's token; default the ``SNRL_ENV_TOKEN`` environment variable.
        timeout: Seconds one attempt of a call may take in all (connect, send, answer),
            in (0, 86400].
        retries: Retries of a call that failed on the network, in [0, 100].
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
        self.session: str | None = None
        if unknown:
            raise UserError(
                f"a remote env takes no options {sorted(unknown)} (its env_kwargs are the "
                "client's: timeout, retries, backoff; options of the env itself are the "
                "server's: snrl serve-env ... --env-kwargs JSON)"
            )
        self.url = check_url(url)
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
                f"the env server {self.url} needs its token (set {TOKEN_ENV_VAR}=<the "
                "token `snrl serve-env` printed>, or pass RemoteEnv(url, token=...))"
            )
        if not isinstance(token, str) or not token.isprintable() or not token.isascii():
            raise UserError(
                f"the token of {self.url} must be printable ASCII text (set {TOKEN_ENV_VAR} "
                "to the token `snrl serve-env` printed)"
            )
        _check_options(timeout, retries, backoff)
        self.timeout, self.retries, self.backoff = float(timeout), retries, backoff
        self._httpx = httpx
        self._deadline = _Deadline()
        # TCP_NODELAY: httpx writes the headers and the body of a request separately, and
        # without it Nagle's algorithm holds the body until the server's delayed ACK (40 ms).
        nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        transport = httpx.HTTPTransport(verify=_tls_context(), retries=0, socket_options=nodelay)
        pool = transport._pool  # httpx has no public hook for the network backend
        pool._network_backend = _deadline_backend(pool._network_backend, self._deadline)
        try:
            self._client = httpx.Client(
                headers={
                    "Authorization": f"Bearer {token}",
                    CLIENT_HEADER: _CLIENT_ID,
                    "Accept-Encoding": "identity",
                },
                timeout=httpx.Timeout(self.timeout),
                transport=transport,
                trust_env=False,  # no proxies from the environment: the token goes to url only
            )
        except httpx.InvalidURL as e:  # check_url lets nothing through that gets here
            raise UserError(f"env URL {_cut(url)}: {e} (write it as http://HOST:PORT)") from None
        self._seq = 0
        self._prefetched: dict[str, Any] | None = None
        try:
            created = self._call(
                "POST", "v1/sessions", {}, idempotent=False, what="create a session"
            )
        except BaseException:
            self._client.close()
            raise
        try:
            session = _field(created, "session")
            if not isinstance(session, str) or not _SESSION_RE.fullmatch(session):
                raise WireError(
                    f"field 'session' must be 1 to 128 of [A-Za-z0-9_-], got {_cut(session)}"
                )
            self.session = session
            # the session ends when this env is closed, collected, or at the latest when the
            # interpreter exits (a run that stops on an error does not leak its sessions)
            self._finalizer = weakref.finalize(
                self, _end_session, self._client, self._deadline, self.url, session, self.timeout
            )
            for name in ("observation_space", "action_space"):
                try:
                    setattr(self, name, decode_space(_field(created, name)))
                except WireError as e:
                    raise WireError(f"field {name!r}: {e}") from None
            env_id = created.get("env")
            self.remote_env_id = printable(env_id, 200) if isinstance(env_id, str) else ""
        except WireError as e:
            self.close()
            raise RemoteEnvError(
                f"env server {self.url} answered the session request with something that is "
                f"not the snrl protocol: {e} (check the URL and the server's version)"
            ) from None

    # -- transport --------------------------------------------------------------------------
    def _fail(self, what: str, reason: str) -> RemoteEnvError:
        return RemoteEnvError(
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
                status, raw = self._exchange(method, path, body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
                reason = f"cannot connect ({type(e).__name__})"
            except httpx.TransportError as e:  # sent, perhaps applied: retry only if safe
                reason = f"{type(e).__name__}: {_cut(str(e), 200)}" if str(e) else type(e).__name__
                if not idempotent:
                    raise self._fail(what, reason) from None
            except httpx.HTTPError as e:
                raise self._fail(what, f"{type(e).__name__}: {_cut(str(e), 200)}") from None
            except WireError as e:
                raise RemoteEnvError(
                    f"env server {self.url} answered {what} outside the protocol: {e} (is it "
                    "an snrl env server?)"
                ) from None
            else:
                return self._answer(status, raw, what)
            attempt += 1
            if attempt > self.retries:
                raise self._fail(what, f"{reason}, after {self.retries} retries")
            time.sleep(min(self.backoff * 2 ** (attempt - 1), 2.0))

    def _exchange(self, method: str, path: str, body: Any) -> tuple[int, bytes]:
        """One attempt: the status and the (decoded) body, within the deadline and the size
        cap. Raises httpx errors (network, timeout) and WireError (an answer too large)."""
        self._deadline.at = time.monotonic() + self.timeout
        try:
            with self._client.stream(method, f"{self.url}/{path}", json=body) as r:
                decode = _decoder(r.headers.get("content-encoding", ""))
                length = r.headers.get("content-length", "")
                if length.isdigit() and int(length) > MAX_REPLY:
                    raise WireError(f"the answer is over {MAX_REPLY} bytes ({length})")
                chunks: list[bytes] = []
                size = 0
                for chunk in r.iter_raw():
                    if decode is not None:
                        chunk = decode(chunk, MAX_REPLY - size)
                    size += len(chunk)
                    if size > MAX_REPLY:
                        raise WireError(f"the answer is over {MAX_REPLY} bytes")
                    chunks.append(chunk)
                    if self._deadline.at is not None and time.monotonic() > self._deadline.at:
                        raise self._httpx.ReadTimeout("the call's deadline passed")
                return r.status_code, b"".join(chunks)
        finally:
            self._deadline.at = None

    def _answer(self, status: int, raw: bytes, what: str) -> dict[str, Any]:
        try:
            body = _json_reply(raw)
        except (ValueError, RecursionError):
            body = None
        if not 200 <= status < 300:  # redirects are not followed: the token stays here
            msg = body.get("error") if isinstance(body, dict) else None
            if not isinstance(msg, str):
                msg = raw[:200].decode("utf-8", "replace")
            msg = server_message(msg)
            if status == 401:
                raise UserError(
                    f"env server {self.url} refused the token: {msg} (set {TOKEN_ENV_VAR} to "
                    "the token `snrl serve-env` printed)"
                )
            raise RemoteEnvError(
                f"env server {self.url} could not {what}: HTTP {status}: {msg}", status=status
            )
        if not isinstance(body, dict):
            raise RemoteEnvError(
                f"env server {self.url} answered {what} with something that is not a JSON "
                "object (is it an snrl env server?)"
            )
        return body

    def _session_call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.session is None:
            raise UserError(f"the remote env {self.url} is closed (make a new one)")
        self._seq += 1
        body = {"seq": self._seq, **body}
        try:
            out = self._call(
                "POST", f"v1/sessions/{self.session}/{op}", body, idempotent=True, what=op
            )
        except RemoteEnvError as e:
            if e.status is not None:  # refused: the server did not apply it
                self._seq -= 1
            raise
        self._check_seq(out, op)
        return out

    def _check_seq(self, out: dict[str, Any], op: str) -> None:
        if out.get("seq") != self._seq:
            raise RemoteEnvError(
                f"env server {self.url} answered {op} {self._seq} with seq "
                f"{_cut(out.get('seq'))} (the server does not follow the protocol)"
            )

    def _bad(self, op: str, e: WireError) -> RemoteEnvError:
        return RemoteEnvError(f"env server {self.url} sent a bad {op} answer: {e}")

    # -- gymnasium --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):  # noqa: D102
        super().reset(seed=seed)
        out = self._session_call("reset", {"seed": seed, "options": encode_value(options)})
        try:
            try:
                obs = decode_obs(self.observation_space, _field(out, "observation"))
            except WireError as e:
                raise WireError(f"field 'observation': {e}") from None
            info = _info(out)
        except WireError as e:
            raise self._bad("reset", e) from None
        return obs, info

    def _prepare_step(self, action: Any) -> dict[str, Any]:
        """The next step call of this session (its seq taken), for a batched request."""
        if self.session is None:
            raise UserError(f"the remote env {self.url} is closed (make a new one)")
        try:
            wire_action = encode_obs(self.action_space, action)
        except WireError as e:
            raise UserError(f"action {_cut(action)} cannot be sent: {e}") from None
        self._seq += 1
        return {"session": self.session, "seq": self._seq, "action": wire_action}

    def step(self, action: Any):  # noqa: D102
        out, self._prefetched = self._prefetched, None
        if out is None:  # not stepped by RemoteVectorEnv's batched request
            call = self._prepare_step(action)
            try:
                out = self._call(
                    "POST",
                    f"v1/sessions/{self.session}/step",
                    {"seq": call["seq"], "action": call["action"]},
                    idempotent=True,
                    what="step",
                )
            except RemoteEnvError as e:
                if e.status is not None:  # refused: the server did not apply it
                    self._seq -= 1
                raise
        if not isinstance(out, dict):
            raise self._bad("step", WireError("a step answer must be an object"))
        if "error" in out:
            self._seq -= 1  # refused in the batch: not applied
            status = out.get("status")
            msg = out["error"] if isinstance(out["error"], str) else repr(out["error"])
            msg = server_message(msg)
            raise RemoteEnvError(
                f"env server {self.url} could not step: HTTP {_cut(status)}: {msg}",
                status=status if isinstance(status, int) and not isinstance(status, bool) else 0,
            )
        self._check_seq(out, "step")
        try:
            try:
                obs = decode_obs(self.observation_space, _field(out, "observation"))
            except WireError as e:
                raise WireError(f"field 'observation': {e}") from None
            reward = _reward(_field(out, "reward"))
            terminated, truncated = _field(out, "terminated"), _field(out, "truncated")
            if not isinstance(terminated, bool) or not isinstance(truncated, bool):
                raise WireError("fields 'terminated' and 'truncated' must be true/false")
            info = _info(out)
        except WireError as e:
            raise self._bad("step", e) from None
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
        self.session = None
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()  # ends the session and closes the connection, once
        elif getattr(self, "_client", None) is not None:
            self._client.close()
        super().close()


class RemoteVectorEnv(gym.vector.SyncVectorEnv):
    """A ``SyncVectorEnv`` of :class:`RemoteEnv` sub-envs (each in any wrappers that pass
    actions through unchanged) that steps all of them in one request (``POST v1/step``)
    instead of one request per sub-env; resets, and everything else, are those of
    ``SyncVectorEnv``. Only ``SAME_STEP`` autoreset (what :func:`snrl.make_vector_env`
    builds): there every sub-env is stepped at every vector step.

    When making sub-env ``k`` fails, sub-envs ``0 .. k-1`` are closed (their sessions ended
    on the server) before the error is raised. Sub-envs on different servers, or a server
    without ``v1/step`` (HTTP 404), are stepped one request each.
    """

    def __init__(self, env_fns: Any, **kwargs: Any) -> None:
        made: list[gym.Env] = []

        def tracked(fn: Any) -> Any:
            def make() -> gym.Env:
                env = fn()
                made.append(env)
                return env

            return make

        try:
            super().__init__([tracked(fn) for fn in env_fns], **kwargs)
        except BaseException:
            for env in made:
                try:
                    env.close()
                except Exception:  # noqa: S110 - the first error is the one to report
                    pass
            raise
        if self.autoreset_mode != gym.vector.AutoresetMode.SAME_STEP:
            self.close()
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
            except RemoteEnvError as e:
                if e.status is not None:  # refused as a whole: no sub-env was stepped
                    for r in remotes:
                        r._seq -= 1
                if e.status != 404:
                    raise
                self._remotes = None  # a server without the batch endpoint
                return super().step(actions)
            results = out.get("results")
            if not isinstance(results, list) or len(results) != len(remotes):
                raise RemoteEnvError(
                    f"env server {remotes[0].url} answered {len(remotes)} steps with "
                    "something else (the server does not follow the protocol)"
                )
            for r, res in zip(remotes, results):
                r._prefetched = res if isinstance(res, dict) else {"error": _cut(res)}
        return super().step(actions)

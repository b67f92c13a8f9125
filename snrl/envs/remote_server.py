"""The reference env server: any gymnasium env over the protocol of :mod:`snrl.envs.remote`
(docs/remote.md), with Starlette (the ASGI app) and uvicorn (the HTTP server) from the
``[remote]`` extra.

``snrl serve-env ENV_ID`` runs :func:`serve` in the foreground; tests and benchmarks run an
:class:`EnvServer` in a background thread (``with EnvServer("CartPole-v1") as server:``).

Security: the server binds 127.0.0.1 unless told otherwise; every request needs
``Authorization: Bearer <token>``, compared in constant time; request bodies are limited to
``max_body`` bytes; a request that does not follow the protocol (malformed JSON, an array of
the wrong shape or dtype, an action outside the action space, an unknown or closed session,
a sequence number out of order) gets a 4xx with a message and the server keeps serving.
A connection must send each request's head within ``header_timeout`` seconds and its body
within ``body_timeout`` more, and at most ``max_connections`` are open (a slow or idle
client cannot hold the server's sockets); sessions unused for ``idle_timeout`` seconds are
closed, and one client (process) holds at most ``max_client_sessions``. Env calls run in a
thread pool, one call of a session at a time, so a slow env stalls only its own session;
nothing received is ever unpickled or executed. docs/reliability.md ("The env server")
has the threat model and the cases tried.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import hmac
import json
import math
import re
import secrets
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from snrl.config import check_host
from snrl.envs.make import check_env_kwargs, make_env
from snrl.envs.remote import (
    PROTOCOL,
    WireError,
    _reject_constant,
    decode_obs,
    decode_value,
    encode_obs,
    encode_space,
    encode_value,
    is_remote_env,
)
from snrl.errors import UserError, describe, printable
from snrl.io import load_json

__all__ = ["EnvServer", "LOOPBACK", "announce", "new_token", "serve"]

#: Hosts that only this machine reaches.
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Default limits: bytes of one request body, open sessions (in all, and per client).
MAX_BODY = 1 << 20
MAX_SESSIONS = 64
#: Seconds a session may go unused before the server closes it (0: never).
IDLE_TIMEOUT = 1800.0
#: Seconds a connection may take to send a request's headers; then its body.
HEADER_TIMEOUT = 10.0
BODY_TIMEOUT = 30.0
#: Threads that run env calls (one call of a session at a time; sessions in parallel).
THREADS = 8
#: Connections the server accepts in one go.
ACCEPT_BATCH = 32
#: Largest request head (request line and headers), bytes.
MAX_HEAD = 16 * 1024
#: Closed session ids remembered, to answer "closed" rather than "unknown".
_CLOSED_MEMORY = 4096
#: Shortest token the server accepts.
MIN_TOKEN_CHARS = 16
#: What a client that names none is counted as.
_ANONYMOUS = "-"
_CLIENT_RE = re.compile(rb"[A-Za-z0-9_-]{1,64}")


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


class HTTPProblem(Exception):
    """A request the server refuses: ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Session:
    env: gym.Env
    client: str
    lock: asyncio.Lock
    used: float  # time.monotonic() of the last call
    seq: int = 0
    answer: bytes = b""
    steps: int = 0
    resets: int = 0


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode("utf-8")


class _App:
    """The ASGI application: token check, body limit, routing, the sessions.

    Env calls (make, reset, step, close) run in a pool of ``threads`` threads, never in the
    event loop, so a slow env delays only its own session; the calls of one session are
    serialized by its lock. Sessions unused for ``idle_timeout`` seconds are closed (checked
    whenever a request arrives).
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any],
        token: str,
        max_body: int,
        max_sessions: int,
        *,
        max_client_sessions: int | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
        threads: int = THREADS,
    ) -> None:
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.env_id, self.env_kwargs = env_id, env_kwargs
        self._token = token.encode("utf-8")
        self.max_body, self.max_sessions = max_body, max_sessions
        self.max_client_sessions = max_client_sessions or max_sessions
        self.idle_timeout = idle_timeout
        self.sessions: dict[str, _Session] = {}
        self._opening: collections.Counter[str] = collections.Counter()
        self.closed: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._reaped_at = 0.0
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="snrl-env")
        probe = make_env(env_id, **env_kwargs)
        try:
            self.observation_space, self.action_space = probe.observation_space, probe.action_space
            self.spaces = {
                "protocol": PROTOCOL,
                "env": env_id,
                "observation_space": encode_space(self.observation_space),
                "action_space": encode_space(self.action_space),
            }
        finally:
            probe.close()
        h = self._handler
        self.starlette = Starlette(
            routes=[
                Route("/v1/spaces", h(self.get_spaces), methods=["GET"]),
                Route("/v1/sessions", h(self.create), methods=["POST"]),
                Route("/v1/sessions/{sid}", h(self.counters), methods=["GET"]),
                Route("/v1/sessions/{sid}", h(self.close), methods=["DELETE"]),
                Route("/v1/sessions/{sid}/reset", h(self.reset), methods=["POST"]),
                Route("/v1/sessions/{sid}/step", h(self.step), methods=["POST"]),
                Route("/v1/step", h(self.step_many), methods=["POST"]),
            ]
        )

    # -- ASGI -------------------------------------------------------------------------------
    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            auth = b""
            for key, value in scope.get("headers", ()):
                if key == b"authorization":
                    auth = value
                    break
            scheme, _, given = auth.partition(b" ")
            ok = scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
            if not ok:
                await self._send(
                    send,
                    401,
                    {
                        "error": "missing or wrong token (send the header "
                        "Authorization: Bearer <token>)"
                    },
                )
                return
        await self.starlette(scope, receive, send)

    @staticmethod
    async def _send(send: Callable, status: int, body: dict) -> None:
        data = _json_bytes(body)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def _handler(self, fn: Callable[..., Awaitable[Any]]) -> Callable:
        from starlette.responses import Response

        async def endpoint(request: Any) -> Any:
            self._reap()
            try:
                out = await fn(request)
                status = 200
            except HTTPProblem as e:
                out, status = {"error": str(e)}, e.status
            except WireError as e:
                out, status = {"error": str(e)}, 422
            if not isinstance(out, bytes):
                out = _json_bytes(out)
            return Response(out, status_code=status, media_type="application/json")

        return endpoint

    async def _in_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def _body(self, request: Any) -> dict[str, Any]:
        from starlette.requests import ClientDisconnect

        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit() or not length.isascii():
                raise HTTPProblem(400, "bad Content-Length")
            if int(length) > self.max_body:
                raise HTTPProblem(413, f"request body over {self.max_body} bytes")
        chunks, size = [], 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body:
                    raise HTTPProblem(413, f"request body over {self.max_body} bytes")
                chunks.append(chunk)
        except ClientDisconnect:  # the client left (or its body was too slow: cut off)
            raise HTTPProblem(400, "the request body did not arrive") from None
        raw = b"".join(chunks)
        if not raw:
            return {}
        try:
            body = load_json(raw, what="the request body", parse_constant=_reject_constant)
        except (WireError, UserError) as e:  # a bad constant; nested too deeply
            raise HTTPProblem(400, str(e)) from None
        except (ValueError, RecursionError) as e:
            raise HTTPProblem(400, f"body is not JSON: {describe(e)}") from None
        if not isinstance(body, dict):
            raise HTTPProblem(400, "body must be a JSON object")
        return body

    def _session(self, request: Any) -> tuple[str, _Session]:
        sid = request.path_params["sid"]
        return sid, self._lookup(sid)

    def _lookup(self, sid: str) -> _Session:
        s = self.sessions.get(sid)
        if s is None:
            if sid in self.closed:
                raise HTTPProblem(410, f"session {sid} is {self.closed[sid]} (create a new one)")
            raise HTTPProblem(404, f"unknown session {sid[:64]!r} (create one: POST v1/sessions)")
        s.used = time.monotonic()
        return s

    def _forget(self, sid: str, why: str) -> None:
        """Take ``sid`` out of the open sessions (its env is closed by the caller)."""
        self.sessions.pop(sid, None)
        self.closed[sid] = why
        while len(self.closed) > _CLOSED_MEMORY:
            self.closed.popitem(last=False)

    def _reap(self) -> None:
        """Close the sessions unused for ``idle_timeout`` s (at most once a second)."""
        now = time.monotonic()
        if not self.idle_timeout or now - self._reaped_at < 1.0:
            return
        self._reaped_at = now
        for sid, s in list(self.sessions.items()):
            if now - s.used > self.idle_timeout and not s.lock.locked():  # no call running
                self._forget(sid, f"closed: unused for over {self.idle_timeout:g} s")
                self._pool.submit(_close_quietly, s.env)

    @staticmethod
    def _client(request: Any) -> str:
        raw = request.headers.get("x-snrl-client")
        if raw is None:
            return _ANONYMOUS
        if not _CLIENT_RE.fullmatch(raw.encode("latin-1")):
            raise HTTPProblem(400, "X-SNRL-Client must be 1 to 64 of [A-Za-z0-9_-]")
        return raw

    # -- routes -----------------------------------------------------------------------------
    async def get_spaces(self, request: Any) -> dict[str, Any]:
        return self.spaces

    async def create(self, request: Any) -> dict[str, Any]:
        await self._body(request)  # limit and check it; no options yet
        client = self._client(request)
        self._reaped_at = 0.0
        self._reap()
        held = collections.Counter(s.client for s in self.sessions.values()) + self._opening
        if sum(held.values()) >= self.max_sessions:
            idle = max((time.monotonic() - s.used for s in self.sessions.values()), default=0)
            expiry = (
                f"sessions unused for {self.idle_timeout:g} s are closed"
                if self.idle_timeout
                else "idle sessions are never closed (--idle-timeout 0)"
            )
            raise HTTPProblem(
                503,
                f"{self.max_sessions} sessions are open ({held[client]} by this client, "
                f"{len(held) - (client in held)} other clients; the longest unused for "
                f"{idle:.0f} s; {expiry}) (close some, or start the server with a larger "
                "--max-sessions: training needs n_envs + eval_episodes)",
            )
        if held[client] >= self.max_client_sessions:
            raise HTTPProblem(
                503,
                f"this client holds {held[client]} sessions, the most one client may "
                f"(--max-client-sessions {self.max_client_sessions}) (close some, or start "
                "the server with a larger --max-client-sessions)",
            )
        self._opening[client] += 1  # counted before the await: no race past the limit
        try:
            env = await self._in_thread(make_env, self.env_id, **self.env_kwargs)
        except Exception as e:
            raise HTTPProblem(500, f"making the env failed: {describe(e)}") from None
        finally:
            self._opening[client] -= 1
            if not self._opening[client]:
                del self._opening[client]
        sid = secrets.token_hex(16)
        self.sessions[sid] = _Session(env, client, asyncio.Lock(), time.monotonic())
        return {"session": sid, **self.spaces}

    async def counters(self, request: Any) -> dict[str, Any]:
        sid, s = self._session(request)
        return {"session": sid, "seq": s.seq, "steps": s.steps, "resets": s.resets}

    async def close(self, request: Any) -> dict[str, Any]:
        sid = request.path_params["sid"]
        s = self.sessions.get(sid)
        if s is None:
            self._session(request)  # 404 / 410
        self._forget(sid, "closed")
        async with s.lock:  # a call still running on the env ends first
            await self._in_thread(_close_quietly, s.env)
        return {"session": sid, "closed": True}

    def _seq(self, body: dict[str, Any], s: _Session) -> int | None:
        """The call's sequence number; None when it repeats the last one."""
        seq = body.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise HTTPProblem(400, f"seq must be an integer, got {_short_repr(seq)}")
        if seq == s.seq and s.seq > 0:
            return None
        if seq != s.seq + 1:
            raise HTTPProblem(
                409, f"seq {_short_repr(seq)} out of order (the session's last seq is {s.seq})"
            )
        return seq

    def _alive(self, sid: str, s: _Session) -> None:
        """Refuse a call on a session closed while it waited for the session's lock."""
        if self.sessions.get(sid) is not s:
            raise HTTPProblem(410, f"session {sid} is {self.closed.get(sid, 'closed')}")

    async def reset(self, request: Any) -> Any:
        body = await self._body(request)
        sid, s = self._session(request)
        async with s.lock:
            self._alive(sid, s)
            seq = self._seq(body, s)
            if seq is None:
                return s.answer
            seed = body.get("seed")
            if seed is not None and (
                isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63
            ):
                raise HTTPProblem(
                    422, f"seed must be null or an integer in [0, 2**63), got {_short_repr(seed)}"
                )
            try:
                options = decode_value(body.get("options"))
            except WireError as e:
                raise HTTPProblem(422, f"options: {e}") from None
            if options is not None and not isinstance(options, dict):
                raise HTTPProblem(422, "options must be null or an object")
            try:
                obs, info = await self._in_thread(s.env.reset, seed=seed, options=options)
            except Exception as e:
                raise HTTPProblem(500, f"the env raised in reset: {describe(e)}") from None
            answer = self._answer({"seq": seq, "observation": obs, "info": info}, "reset")
            s.seq, s.resets, s.answer = seq, s.resets + 1, answer
            s.used = time.monotonic()
            return answer

    def _answer(self, out: dict[str, Any], op: str) -> bytes:
        """An answer as bytes; an observation the space cannot carry is the env's error."""
        try:
            out["observation"] = encode_obs(self.observation_space, out["observation"])
            out["info"] = encode_value(out["info"])
            return _json_bytes(out)
        except (WireError, ValueError, TypeError, KeyError, IndexError) as e:
            raise HTTPProblem(500, f"the env's {op} answer cannot be sent: {describe(e)}") from None

    async def step(self, request: Any) -> Any:
        body = await self._body(request)
        sid, s = self._session(request)
        return await self._step(sid, s, body)

    async def step_many(self, request: Any) -> Any:
        """Step several sessions in one request: ``{"calls": [{"session", "seq", "action"},
        ...]}`` -> ``{"results": [answer or {"error", "status"}, ...]}`` in the same order.

        The sessions' locks are taken in one order (by id, so two batches cannot wait for
        each other), then all the steps run in one trip to the thread pool: a hop per env
        would cost more than a cheap env's step."""
        body = await self._body(request)
        calls = body.get("calls")
        if not isinstance(calls, list) or not calls or len(calls) > self.max_sessions:
            raise HTTPProblem(400, f"calls must be a list of 1 to {self.max_sessions} steps")
        parts: list[bytes | None] = [None] * len(calls)
        found: dict[str, tuple[int, _Session]] = {}
        for i, call in enumerate(calls):
            try:
                if not isinstance(call, dict) or not isinstance(call.get("session"), str):
                    raise HTTPProblem(400, "each call needs a session")
                sid = call["session"]
                if sid in found:
                    raise HTTPProblem(400, f"session {sid[:64]!r} twice in one batch")
                found[sid] = (i, self._lookup(sid))
            except HTTPProblem as e:
                parts[i] = _json_bytes({"error": str(e), "status": e.status})
        async with contextlib.AsyncExitStack() as stack:
            for sid in sorted(found):
                await stack.enter_async_context(found[sid][1].lock)
            todo = []
            for sid, (i, s) in found.items():
                try:
                    self._alive(sid, s)
                    prepared = self._prepare_step(s, calls[i])
                except HTTPProblem as e:
                    parts[i] = _json_bytes({"error": str(e), "status": e.status})
                    continue
                if isinstance(prepared, bytes):
                    parts[i] = prepared
                else:
                    todo.append((i, s, *prepared))
            if todo:
                results = await self._in_thread(
                    lambda: [_env_step(s.env, action) for _, s, _, action in todo]
                )
                for (i, s, seq, _), result in zip(todo, results):
                    try:
                        parts[i] = self._finish_step(s, seq, result)
                    except HTTPProblem as e:
                        parts[i] = _json_bytes({"error": str(e), "status": e.status})
        return b'{"results":[' + b",".join(parts) + b"]}"  # type: ignore[arg-type]

    def _prepare_step(self, s: _Session, body: dict[str, Any]) -> bytes | tuple[int, Any]:
        """A retry's stored answer, or the new call's (seq, action); raises HTTPProblem."""
        seq = self._seq(body, s)
        if seq is None:
            return s.answer
        if "action" not in body:
            raise HTTPProblem(400, "step needs an action")
        try:
            action = decode_obs(self.action_space, body["action"])
        except WireError as e:
            raise HTTPProblem(422, f"action: {e}") from None
        if not self.action_space.contains(action):
            raise HTTPProblem(
                422,
                f"action {_short(action)} is outside the action space "
                f"{' '.join(str(self.action_space).split())}",
            )
        if s.resets == 0:
            raise HTTPProblem(409, "step before the first reset (reset the session first)")
        return seq, action

    def _finish_step(self, s: _Session, seq: int, result: Any) -> bytes:
        """The answer to a step that ran (``result``: its 5 values, or what it raised)."""
        if isinstance(result, BaseException):
            raise HTTPProblem(500, f"the env raised in step: {describe(result)}")
        obs, reward, terminated, truncated, info = result
        answer = self._answer(
            {
                "seq": seq,
                "observation": obs,
                "reward": reward if math.isfinite(reward) else str(reward).lower(),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": info,
            },
            "step",
        )
        s.seq, s.steps, s.answer = seq, s.steps + 1, answer
        s.used = time.monotonic()
        return answer

    async def _step(self, sid: str, s: _Session, body: dict[str, Any]) -> bytes:
        async with s.lock:
            self._alive(sid, s)
            prepared = self._prepare_step(s, body)
            if isinstance(prepared, bytes):
                return prepared
            seq, action = prepared
            result = await self._in_thread(_env_step, s.env, action)
            return self._finish_step(s, seq, result)

    def close_all(self) -> None:
        for s in self.sessions.values():
            self._pool.submit(_close_quietly, s.env)
        self.sessions.clear()
        self._pool.shutdown(wait=True, cancel_futures=False)


def _env_step(env: gym.Env, action: Any) -> Any:
    """``env.step(action)`` with a float reward, or the exception it raised (returned, so
    one env's error leaves the other steps of a batch alone)."""
    try:
        obs, reward, terminated, truncated, info = env.step(action)
        return obs, float(reward), terminated, truncated, info
    except Exception as e:
        return e


def _close_quietly(env: gym.Env) -> None:
    try:
        env.close()
    except Exception:  # noqa: S110 - the session is gone either way
        pass


def _short_repr(x: Any) -> str:
    return printable(repr(x), 80)


def _short(x: Any) -> str:
    text = " ".join(str(np.asarray(x).tolist()).split())
    return text if len(text) <= 80 else text[:77] + "..."


def _check_args(env_id: str, host: str, port: int, token: str) -> None:
    check_host(host)
    if is_remote_env(env_id):
        raise UserError(f"serve-env serves a local env, not the URL {env_id} (pass an env id)")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise UserError(f"port {port!r} (pass an integer in [0, 65535]; 0 picks a free one)")
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or not token.isprintable():
        raise UserError(
            f"the token must be at least {MIN_TOKEN_CHARS} printable characters (leave it out "
            "to have one generated)"
        )
    if any(c.isspace() for c in token):
        raise UserError("the token must not contain spaces (leave it out to have one generated)")


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets of that proto;
    # without it the body of every answer waits for the client's delayed ACK (40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {e.strerror or e} (choose another "
            "--port, or 0 for a free one)"
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


_RAW_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_RAW_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"content-length: 61\r\nconnection: close\r\n\r\n"
    b'{"error":"too many connections (close some, or retry later)"}'
)


def _guarded_protocol(header_timeout: float, body_timeout: float, max_connections: int) -> type:
    """uvicorn's h11 protocol with a time limit on reading each request and a limit on open
    connections.

    uvicorn arms its keep-alive timer only after a response and cancels it on the first
    byte received, so a connection that sends a partial request head (or a body) slowly is
    held forever ("slowloris"), and ``limit_concurrency`` counts only requests whose head
    has arrived. Here every connection must deliver a request's head within
    ``header_timeout`` seconds of opening (or of the previous answer) and its body within
    ``body_timeout`` seconds more, or it gets 408 and is closed. At ``max_connections``, a
    new connection closes (503) the one that has waited longest for a request head (a
    slow or idle one: a working client sends its head at once), and is refused with 503
    only when every connection is busy with a request. So a flood of slow connections
    cannot lock a real client out for longer than it takes that client to send its head.
    The phase is read from h11's state of the peer: IDLE (head not complete), SEND_BODY,
    or done.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    # connections waiting for a request head, oldest first (this server's only)
    waiting: collections.OrderedDict[Any, None] = collections.OrderedDict()

    class GuardedH11Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _phase: str | None = None
        _partial = False

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                if not waiting:  # every connection is busy with a request
                    transport.write(_RAW_503)
                    transport.close()
                    return
                oldest, _ = waiting.popitem(last=False)
                oldest._arm(None)
                oldest._hang_up(_RAW_503)
            self._track()

        def data_received(self, data: bytes) -> None:
            self._partial = True  # bytes of a request came (reset when a new one may start)
            super().data_received(data)
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()

        def connection_lost(self, exc: Exception | None) -> None:
            self._arm(None)
            super().connection_lost(exc)

        def _track(self) -> None:
            state = self.conn.their_state
            phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
            if self.transport.is_closing():
                phase = None
            if phase != self._phase:
                self._arm(phase)

        def _arm(self, phase: str | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._phase = phase
            if phase == "head":
                self._partial = False
                waiting[self] = None
            else:
                waiting.pop(self, None)
            if phase is not None:
                delay = header_timeout if phase == "head" else body_timeout
                self._timer = self.loop.call_later(delay, self._expired)

        def _expired(self) -> None:
            self._timer = None
            self._hang_up(_RAW_408)

        def _hang_up(self, answer: bytes) -> None:
            """Close; with ``answer`` only when a request had begun: an idle keep-alive
            connection is closed silently, so a client that reuses it at that moment sees
            a closed connection (and retries) rather than an answer to a request it never
            made."""
            if not self.transport.is_closing():
                if self._partial or self._phase == "body":
                    self.transport.write(answer)
                self.transport.close()

    return GuardedH11Protocol


def _default_connections(max_sessions: int) -> int:
    """``2 * max_sessions + 32``, less when the process may open few files (``ulimit -n``):
    room is kept for one accept batch and the files of the env and the interpreter."""
    want = 2 * max_sessions + 32
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return want
    if soft == resource.RLIM_INFINITY:
        return want
    return max(8, min(want, soft - ACCEPT_BATCH - 96))


class EnvServer:
    """An env server in a background thread (tests, benchmarks, notebooks).

    Args:
        env_id: The env to serve (as for :func:`snrl.make_env`); each session makes one.
        host: Address to bind (default loopback only).
        port: Port (0: a free one; read :attr:`port` / :attr:`url` after construction).
        token: The token clients must send (default: a new random one, :attr:`token`).
        env_kwargs: Keyword arguments for every env.
        max_body: Largest request body, bytes.
        max_sessions: Most sessions open at once.
        max_client_sessions: Most sessions one client (one process, by the ``X-SNRL-Client``
            header its RemoteEnvs send) may hold; default ``max_sessions``.
        idle_timeout: Seconds a session may go unused before it is closed (0: never).
        header_timeout: Seconds a connection may take to send a request's head.
        body_timeout: Seconds it may then take to send the body.
        max_connections: Most open connections; default ``2 * max_sessions + 32`` (less when
            ``ulimit -n`` is low: that minus 128).
        threads: Threads that run env calls.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        env_id: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        max_body: int = MAX_BODY,
        max_sessions: int = MAX_SESSIONS,
        max_client_sessions: int | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        max_connections: int | None = None,
        threads: int = THREADS,
    ) -> None:
        try:
            import uvicorn
        except ImportError:
            raise UserError(
                "serving envs needs the [remote] extra (pip install 'snrl[remote]')"
            ) from None
        self.token = token if token is not None else new_token()
        _check_args(env_id, host, port, self.token)
        check_env_kwargs(env_kwargs or {})
        limits = dict(
            idle_timeout=idle_timeout, header_timeout=header_timeout, body_timeout=body_timeout
        )
        for name, value in limits.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{name}={value!r} (pass a number of seconds)")
            if not (math.isfinite(value) and 0 <= value <= 10**7) or (
                name != "idle_timeout" and value == 0
            ):
                raise UserError(f"{name}={value!r} (pass a number of seconds in (0, 1e7])")
        if max_connections is None:
            max_connections = _default_connections(max_sessions)
        self.app = _App(
            env_id,
            dict(env_kwargs or {}),
            self.token,
            max_body,
            max_sessions,
            max_client_sessions=max_client_sessions,
            idle_timeout=float(idle_timeout),
            threads=threads,
        )
        self._sock = _bind(host, port)
        self.host, self.port = host, self._sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http=_guarded_protocol(header_timeout, body_timeout, max_connections),
            h11_max_incomplete_event_size=MAX_HEAD,
            # connections accepted in one go, before any is counted against the limit (uvicorn's
            # default, 2048, can run the process out of file descriptors first)
            backlog=ACCEPT_BATCH,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        """Serve in this thread until stopped (Ctrl-C, SIGTERM, or :meth:`stop`)."""
        try:
            self._server.run(sockets=[self._sock])
        finally:
            self.app.close_all()
            self._sock.close()

    def start(self) -> EnvServer:
        """Serve in a background thread; returns once the server answers."""
        self._thread = threading.Thread(target=self.run, name="snrl-env-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the env server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and close every session's env."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30.0)
            self._thread = None
        else:  # never started (or served in the foreground, which closed it already)
            self._sock.close()

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def announce(server: EnvServer, *, generated: bool, out: Any) -> None:
    """Print where ``server`` serves, and its token only when it was ``generated`` (the one
    place it is shown); warn on stderr when it is reachable from other machines."""
    if server.host not in LOOPBACK:
        print(
            f"warning: serving on {server.host}, reachable from other machines: anyone who has "
            "the token can run the env, and plain HTTP sends the token unencrypted (put the "
            "server behind TLS, e.g. a reverse proxy, or an SSH tunnel)",
            file=sys.stderr,
        )
    print(f"serving {server.app.env_id} at {server.url} (Ctrl-C stops)", file=out)
    if generated:
        print(f"token: {server.token}", file=out)
    print(f"train on it: SNRL_ENV_TOKEN=<token> snrl train --env {server.url} --out RUN", file=out)
    out.flush()


def serve(
    env_id: str, *, port: int = 8765, token: str | None = None, out: Any = None, **options: Any
) -> None:
    """Serve ``env_id`` in the foreground until Ctrl-C (what ``snrl serve-env`` runs).

    Prints the URL, and the token when it was generated (the only place it is shown), to
    ``out`` (default stdout); warns on stderr when ``host`` is not a loopback address.
    ``options`` are :class:`EnvServer`'s other keywords (``host``, ``env_kwargs``,
    ``max_body``, ``max_sessions``, ``idle_timeout``, ...).
    """
    out = out or sys.stdout
    generated = token is None
    server = EnvServer(env_id, port=port, token=token, **options)
    announce(server, generated=generated, out=out)
    server.run()

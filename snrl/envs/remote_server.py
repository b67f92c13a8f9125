"""The reference env server: any gymnasium env over the protocol of :mod:`snrl.envs.remote`
(docs/remote.md), with Starlette (the ASGI app) and uvicorn (the HTTP server) from the
``[remote]`` extra.

``snrl serve-env ENV_ID`` runs :func:`serve` in the foreground; tests and benchmarks run an
:class:`EnvServer` in a background thread (``with EnvServer("CartPole-v1") as server:``).

Security: the server binds 127.0.0.1 unless told otherwise; every request needs
``Authorization: Bearer <token>``, compared in constant time; request bodies are limited to
``max_body`` bytes; a request that does not follow the protocol (malformed JSON, an array of
the wrong shape or dtype, an action outside the action space, an unknown or closed session,
a sequence number out of order) gets a 4xx with a message and the server keeps serving. The
env runs in the server's event loop, one call at a time, so calls of all sessions are
serialized; nothing received is ever unpickled or executed.
"""

from __future__ import annotations

import collections
import hmac
import json
import math
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
    decode_obs,
    decode_value,
    encode_obs,
    encode_space,
    encode_value,
    is_remote_env,
)
from snrl.errors import UserError, describe

__all__ = ["EnvServer", "LOOPBACK", "announce", "new_token", "serve"]

#: Hosts that only this machine reaches.
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Default limits: bytes of one request body, open sessions.
MAX_BODY = 1 << 20
MAX_SESSIONS = 64
#: Closed session ids remembered, to answer "closed" rather than "unknown".
_CLOSED_MEMORY = 4096
#: Shortest token the server accepts.
MIN_TOKEN_CHARS = 16


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
    seq: int = 0
    answer: bytes = b""
    steps: int = 0
    resets: int = 0


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _reject_constant(name: str) -> Any:
    raise WireError(f'{name} is not valid JSON (send non-finite floats as "nan"/"inf")')


class _App:
    """The ASGI application: token check, body limit, routing, the sessions."""

    def __init__(
        self, env_id: str, env_kwargs: dict[str, Any], token: str, max_body: int, max_sessions: int
    ) -> None:
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.env_id, self.env_kwargs = env_id, env_kwargs
        self._token = token.encode("utf-8")
        self.max_body, self.max_sessions = max_body, max_sessions
        self.sessions: dict[str, _Session] = {}
        self.closed: collections.OrderedDict[str, None] = collections.OrderedDict()
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

    async def _body(self, request: Any) -> dict[str, Any]:
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise HTTPProblem(400, "bad Content-Length")
            if int(length) > self.max_body:
                raise HTTPProblem(413, f"request body over {self.max_body} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                raise HTTPProblem(413, f"request body over {self.max_body} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw:
            return {}
        try:
            body = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except WireError as e:
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
                raise HTTPProblem(410, f"session {sid} is closed (create a new one)")
            raise HTTPProblem(404, f"unknown session {sid[:64]!r} (create one: POST v1/sessions)")
        return s

    # -- routes -----------------------------------------------------------------------------
    async def get_spaces(self, request: Any) -> dict[str, Any]:
        return self.spaces

    async def create(self, request: Any) -> dict[str, Any]:
        await self._body(request)  # limit and check it; no options yet
        if len(self.sessions) >= self.max_sessions:
            raise HTTPProblem(
                503,
                f"{self.max_sessions} sessions are open (close some, or start the server with "
                "a larger --max-sessions: training needs n_envs + eval_episodes)",
            )
        try:  # env calls run in the event loop, without an await: one at a time
            env = make_env(self.env_id, **self.env_kwargs)
        except Exception as e:
            raise HTTPProblem(500, f"making the env failed: {describe(e)}") from None
        sid = secrets.token_hex(16)
        self.sessions[sid] = _Session(env)
        return {"session": sid, **self.spaces}

    async def counters(self, request: Any) -> dict[str, Any]:
        sid, s = self._session(request)
        return {"session": sid, "seq": s.seq, "steps": s.steps, "resets": s.resets}

    async def close(self, request: Any) -> dict[str, Any]:
        sid = request.path_params["sid"]
        s = self.sessions.pop(sid, None)
        if s is None:
            self._session(request)  # 404 / 410
        self.closed[sid] = None
        while len(self.closed) > _CLOSED_MEMORY:
            self.closed.popitem(last=False)
        try:
            s.env.close()
        except Exception:  # noqa: S110 - the session is gone either way
            pass
        return {"session": sid, "closed": True}

    def _seq(self, body: dict[str, Any], s: _Session) -> int | None:
        """The call's sequence number; None when it repeats the last one."""
        seq = body.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise HTTPProblem(400, f"seq must be an integer, got {seq!r}")
        if seq == s.seq and s.seq > 0:
            return None
        if seq != s.seq + 1:
            raise HTTPProblem(409, f"seq {seq} out of order (the session's last seq is {s.seq})")
        return seq

    async def reset(self, request: Any) -> Any:
        body = await self._body(request)
        sid, s = self._session(request)
        seq = self._seq(body, s)
        if seq is None:
            return s.answer
        seed = body.get("seed")
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63
        ):
            raise HTTPProblem(422, f"seed must be null or an integer in [0, 2**63), got {seed!r}")
        options = decode_value(body.get("options"))
        if options is not None and not isinstance(options, dict):
            raise HTTPProblem(422, "options must be null or an object")
        try:
            obs, info = s.env.reset(seed=seed, options=options)
        except Exception as e:
            raise HTTPProblem(500, f"the env raised in reset: {describe(e)}") from None
        s.seq, s.resets = seq, s.resets + 1
        s.answer = _json_bytes(
            {
                "seq": seq,
                "observation": encode_obs(self.observation_space, obs),
                "info": encode_value(info),
            }
        )
        return s.answer

    async def step(self, request: Any) -> Any:
        body = await self._body(request)
        _, s = self._session(request)
        return self._step(s, body)

    async def step_many(self, request: Any) -> Any:
        """Step several sessions in one request: ``{"calls": [{"session", "seq", "action"},
        ...]}`` -> ``{"results": [answer or {"error", "status"}, ...]}`` in the same order."""
        body = await self._body(request)
        calls = body.get("calls")
        if not isinstance(calls, list) or not calls or len(calls) > self.max_sessions:
            raise HTTPProblem(400, f"calls must be a list of 1 to {self.max_sessions} steps")
        parts = []
        for call in calls:
            try:
                if not isinstance(call, dict) or not isinstance(call.get("session"), str):
                    raise HTTPProblem(400, "each call needs a session")
                s = self._lookup(call["session"])
                parts.append(self._step(s, call))
            except HTTPProblem as e:
                parts.append(_json_bytes({"error": str(e), "status": e.status}))
            except WireError as e:
                parts.append(_json_bytes({"error": str(e), "status": 422}))
        return b'{"results":[' + b",".join(parts) + b"]}"

    def _step(self, s: _Session, body: dict[str, Any]) -> bytes:
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
        try:
            obs, reward, terminated, truncated, info = s.env.step(action)
        except Exception as e:
            raise HTTPProblem(500, f"the env raised in step: {describe(e)}") from None
        reward = float(reward)
        s.seq, s.steps = seq, s.steps + 1
        s.answer = _json_bytes(
            {
                "seq": seq,
                "observation": encode_obs(self.observation_space, obs),
                "reward": reward if math.isfinite(reward) else str(reward).lower(),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": encode_value(info),
            }
        )
        return s.answer

    def close_all(self) -> None:
        for s in self.sessions.values():
            try:
                s.env.close()
            except Exception:  # noqa: S110 - shutting down
                pass
        self.sessions.clear()


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
        self.app = _App(env_id, dict(env_kwargs or {}), self.token, max_body, max_sessions)
        self._sock = _bind(host, port)
        self.host, self.port = host, self._sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off", loop="asyncio"
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
    env_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_body: int = MAX_BODY,
    max_sessions: int = MAX_SESSIONS,
    out: Any = None,
) -> None:
    """Serve ``env_id`` in the foreground until Ctrl-C (what ``snrl serve-env`` runs).

    Prints the URL, and the token when it was generated (the only place it is shown), to
    ``out`` (default stdout); warns on stderr when ``host`` is not a loopback address.
    """
    out = out or sys.stdout
    generated = token is None
    server = EnvServer(
        env_id,
        host=host,
        port=port,
        token=token,
        env_kwargs=env_kwargs,
        max_body=max_body,
        max_sessions=max_sessions,
    )
    announce(server, generated=generated, out=out)
    server.run()

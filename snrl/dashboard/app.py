"""The dashboard's web application (Starlette): pages, JSON API, event streams, files.

Security model (docs/dashboard.md; the threat model is in docs/reliability.md):

* every request carries the token. The first load of the page passes it as ``?token=``
  (the URL ``snrl dashboard`` prints); the server answers with the page and a cookie
  (``HttpOnly; SameSite=Strict``), and the page keeps the token in its tab
  (``sessionStorage``) and takes it out of the address bar and the history
  (``history.replaceState``). The cookie holds a separate random *read key*: it lets a GET
  (the page without the token, its files, ``<img>``, ``<video>``, ``EventSource``)
  through, never a POST, and no answer to it holds the token. A state-changing request
  (POST) must send the token itself in the ``X-SNRL-Token`` header, which a plain link or a
  form of another site cannot set (no CSRF). Secrets are compared with
  :func:`hmac.compare_digest`. (A script may still pass ``?token=`` or the header on a GET.)
* the page runs under a Content-Security-Policy that allows scripts from the server only
  (no inline script, no eval) and loads nothing from elsewhere (:data:`PAGE_CSP`);
* only files under RUNS_DIR are served: a path with ``..``, an absolute path, a hidden
  component, or one that resolves (through a symbolic link) outside RUNS_DIR is refused.
  A run's files are data someone else may have written: only the image and video types the
  page shows are served as themselves (:data:`INERT_TYPES`); anything else (an ``.svg``, an
  ``.html``) is an ``application/octet-stream`` attachment, and every file goes out with
  ``Content-Security-Policy: sandbox`` and ``X-Content-Type-Options: nosniff``, so nothing
  in a run folder runs as a page of the dashboard's origin;
* request bodies are bounded (:data:`MAX_BODY`, and JSON nesting
  :data:`~snrl.dashboard.runs.MAX_JSON_DEPTH`); a malformed request gets a 4xx and the
  server keeps serving;
* launched runs are ``snrl train`` processes started with an argument list built from a
  validated config, never through a shell, with a ``sys.path`` that holds no run folder
  (:mod:`snrl.dashboard.launcher`), at most ``max_runs`` at once (HTTP 429 beyond).
"""

from __future__ import annotations

import asyncio
import hmac
import html
import json
import math
import os
import re
import secrets
import time
from pathlib import Path, PurePosixPath
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from snrl.dashboard.forms import FORM_ERROR, NAME_RE, algo_classes, schema, validate
from snrl.dashboard.launcher import Launcher, TooManyRuns
from snrl.dashboard.runs import (
    LAUNCH_DIR,
    RunIndex,
    folder_kind,
    found_instead,
    loads_bounded,
    metrics_rows,
    read_tail,
)
from snrl.errors import UserError
from snrl.palette import GROUP_COLORS

__all__ = [
    "INERT_TYPES",
    "MAX_BODY",
    "PAGE_CSP",
    "TOKEN_HEADER",
    "check_token",
    "create_app",
    "plotly_js",
]

#: The header that carries the token (required on POST).
TOKEN_HEADER = "x-snrl-token"
#: Largest request body, bytes.
MAX_BODY = 256 * 1024
#: How often an event stream looks at a run's metrics.csv, seconds.
POLL_S = 0.25
#: Seconds between two status events of a stream.
STATUS_EVERY_S = 2.0
#: The run files served as what they are (the figures and videos the page shows); any other
#: file is sent as an ``application/octet-stream`` attachment.
INERT_TYPES = {
    ".png": "image/png",
    ".gif": "image/gif",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".mp4": "video/mp4",
    ".webm": "video/webm",
}
#: The page's Content-Security-Policy: scripts and everything else from the server only (no
#: inline script, no eval, nothing fetched from elsewhere); inline styles are allowed because
#: plotly.js sets them (a style runs no code); images also as ``data:`` and ``blob:`` URLs
#: (plotly's "download plot" button).
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; media-src 'self'; connect-src 'self'; font-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: Headers of every answer: no MIME sniffing, no Referer, never framed.
COMMON_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
#: Headers of a run file: it runs nothing even when opened on its own (sandbox: no script,
#: an opaque origin).
FILE_HEADERS = {"Content-Security-Policy": "sandbox", "Cross-Origin-Resource-Policy": "same-origin"}

STATIC = Path(__file__).parent / "static"
_STATIC_FILES = {"app.js": "text/javascript", "style.css": "text/css"}


def plotly_js() -> Path:
    """plotly.js as the installed ``plotly`` Python package bundles it (the [dashboard]
    extra): served to the page, so it works offline.

    Raises:
        UserError: If plotly is not installed.
    """
    try:
        import plotly
    except ImportError:
        raise UserError("the dashboard needs plotly (pip install -e '.[dashboard]')") from None
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise UserError(
            f"plotly.js is missing from the plotly package ({path}; reinstall it: "
            "pip install --force-reinstall plotly)"
        )
    return path


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _json(data: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(_jsonable(data), allow_nan=False),
        status_code=status,
        media_type="application/json",
    )


class Dashboard:
    """The state behind the routes: RUNS_DIR, the token, the read key of the cookie, the run
    index, the launcher, the page."""

    def __init__(self, root: Path, token: str, max_runs: int):
        root = root.resolve()
        #: the one run shown when RUNS_DIR is itself a run directory (``snrl dashboard
        #: RUN_DIR``): the parent holds it, and nothing outside it is listed or served
        self.only: str | None = None
        if folder_kind(root) == "run" and root.name and not root.name.startswith("."):
            self.only, root = root.name, root.parent
        self.root = root
        self.token = token
        self.read_key = secrets.token_urlsafe(32)  # the cookie's value: reading only
        self.launcher = Launcher(self.root, max_runs=max_runs)
        self.index = RunIndex(self.root, alive=self.launcher.alive, only=self.only)
        self.plotly = plotly_js()
        self.stopping = False
        page = (STATIC / "index.html").read_text(encoding="utf-8")
        # the curves take snrl.palette's group colours, as the PNG figures do (one palette)
        palette = html.escape(json.dumps(list(GROUP_COLORS)), quote=True)
        page = page.replace("{{PALETTE}}", palette)
        # the page as a request with the token gets it (the page sends it on POST), and as a
        # request with the cookie alone gets it (the tab keeps the token it was given)
        self.page = page.replace("{{TOKEN}}", html.escape(token, quote=True))
        self.page_read_only = page.replace("{{TOKEN}}", "")

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _same(given: str | None, secret: str) -> bool:
        if given is None:
            return False
        return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode("utf-8"))

    @staticmethod
    def cookie_name(request: Request) -> str:
        """The cookie of this server: cookies are shared by every port of a host, so the
        name carries the port (two dashboards on one machine keep their own)."""
        server = request.scope.get("server") or ("", None)
        return f"snrl_dashboard_{server[1]}" if server[1] else "snrl_dashboard"

    def auth(self, request: Request) -> Response | None:
        """None when the request may go on, else the refusal (401 / 403)."""
        header = request.headers.get(TOKEN_HEADER)
        if request.method in ("GET", "HEAD"):
            if header is not None or "token" in request.query_params:
                given = header if header is not None else request.query_params.get("token")
                if not self._same(given, self.token):
                    return _error(403, "wrong token (open the URL snrl dashboard printed)")
                return None
            cookie = request.cookies.get(self.cookie_name(request))
            if cookie is None:
                return _error(401, "missing token (open the URL snrl dashboard printed)")
            if not self._same(cookie, self.read_key):
                return _error(
                    403, "stale session (open the URL snrl dashboard printed: it restarted)"
                )
            return None
        if header is None:
            return _error(
                403,
                f"a {request.method} request needs the token in the X-SNRL-Token header "
                "(a token in the URL or a cookie is accepted for reading only)",
            )
        if not self._same(header, self.token):
            return _error(403, "wrong token in X-SNRL-Token")
        return None

    def safe_path(self, rel: str) -> Path | Response:
        """``RUNS_DIR/rel`` if it lies inside RUNS_DIR, else a 403/404 response."""
        if not rel or "\x00" in rel or "\\" in rel or rel.startswith("/"):
            return _error(403, "path refused (a relative path inside RUNS_DIR)")
        parts = PurePosixPath(rel).parts
        if any(p in ("..", ".") or p.startswith(".") for p in parts):
            return _error(403, "path refused (no '..' and no hidden files)")
        if len(rel) > 1024 or any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in parts):
            return _error(404, "not found (a name too long for a file system)")
        try:
            path = (self.root / rel).resolve()
        except (OSError, RuntimeError, ValueError):
            return _error(404, "not found")
        if path != self.root and self.root not in path.parents:
            return _error(403, "path refused (it leads outside RUNS_DIR)")
        if self.only is not None:
            shown = self.root / self.only
            if path != shown and shown not in path.parents:
                return _error(404, f"not found (this dashboard shows the run {self.only} only)")
        return path

    def run_dir(self, run_id: str) -> Path | Response:
        path = self.safe_path(run_id)
        if isinstance(path, Response):
            return path
        if not path.is_dir():
            return _error(404, f"no run {run_id!r} in {self.root}")
        return path

    async def body(self, request: Request) -> dict[str, Any] | Response:
        length = request.headers.get("content-length")
        if length is not None:
            try:
                if int(length) > MAX_BODY:
                    return _error(413, f"request body over {MAX_BODY} bytes")
            except ValueError:
                return _error(400, "bad Content-Length")
        data = b""
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_BODY:
                return _error(413, f"request body over {MAX_BODY} bytes")
        try:
            obj = loads_bounded(data) if data else {}
        except ValueError as e:  # UnicodeDecodeError, and nesting too deep, included
            return _error(400, f"the request body is not JSON that snrl takes ({e})")
        if not isinstance(obj, dict):
            return _error(400, "the request body is not a JSON object")
        return obj


def _dash(request: Request) -> Dashboard:
    return request.app.state.dashboard


def guarded(handler):
    """``handler`` behind the token check; a :class:`UserError` it raises is a 400."""

    async def endpoint(request: Request) -> Response:
        refused = _dash(request).auth(request)
        if refused is not None:
            return refused
        try:
            return await handler(request)
        except UserError as e:
            return _error(400, str(e))

    return endpoint


# ---------------------------------------------------------------------- pages and files
def _has_token(request: Request) -> bool:
    """Whether the request passed :meth:`Dashboard.auth` with the token (header or query),
    not with the cookie alone."""
    return TOKEN_HEADER in request.headers or "token" in request.query_params


def _target(
    request: Request, key: str = "run_id", *, in_root: bool = False
) -> tuple[Dashboard, str, Path | Response]:
    """The dashboard, the run (or comparison) named in the address, and its folder, or the
    error to answer with: :meth:`Dashboard.safe_path`, or with ``in_root``
    :meth:`Dashboard.run_dir`."""
    dash = _dash(request)
    name = request.path_params[key]
    return dash, name, (dash.run_dir(name) if in_root else dash.safe_path(name))


async def index(request: Request) -> Response:
    """The page. Loaded with the token (the address ``snrl dashboard`` prints), it holds the
    token (its script keeps it in the tab's ``sessionStorage`` and takes it out of the
    address bar) and sets the read-only cookie; loaded with the cookie alone, it holds no
    token: whoever holds only the cookie cannot learn the token from the page."""
    dash = _dash(request)
    with_token = _has_token(request)
    response = Response(
        dash.page if with_token else dash.page_read_only,
        media_type="text/html",
        headers={"Cache-Control": "no-store", "Content-Security-Policy": PAGE_CSP},
    )
    if with_token:
        response.set_cookie(
            dash.cookie_name(request), dash.read_key, httponly=True, samesite="strict", path="/"
        )
    return response


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name == "plotly.min.js":
        return FileResponse(_dash(request).plotly, media_type="text/javascript")
    if name not in _STATIC_FILES:
        return _error(404, "not found")
    return FileResponse(STATIC / name, media_type=_STATIC_FILES[name])


async def api_files(request: Request) -> Response:
    """A file of RUNS_DIR: an image or video the page shows as itself, anything else as an
    attachment; always sandboxed and never sniffed (see the module's docstring)."""
    path = _dash(request).safe_path(request.path_params["path"])
    if isinstance(path, Response):
        return path
    if not path.is_file():  # (a FIFO or a device is no file)
        return _error(404, "not found")
    media = INERT_TYPES.get(path.suffix.lower())
    headers = dict(FILE_HEADERS)
    if media is None:
        return FileResponse(
            path,
            media_type="application/octet-stream",
            filename=path.name,
            content_disposition_type="attachment",
            headers=headers,
        )
    return FileResponse(path, media_type=media, headers=headers)


# ---------------------------------------------------------------------- reading runs
async def api_runs(request: Request) -> Response:
    dash = _dash(request)
    runs = await asyncio.to_thread(dash.index.list_runs)
    _, comparisons = dash.index.scan()
    found = None
    if not runs and not comparisons:  # say why the list is empty
        found = await asyncio.to_thread(found_instead, dash.root)
    return _json(
        {
            "root": str(dash.root if dash.only is None else dash.root / dash.only),
            "only": dash.only,
            "found": found,
            "runs": runs,
            "comparisons": comparisons,
            "running": len(dash.launcher.running()),
            "max_runs": dash.launcher.max_runs,
        }
    )


async def api_run(request: Request) -> Response:
    dash, run_id, d = _target(request)
    if isinstance(d, Response):
        return d
    if not d.is_dir() and dash.index.launch_record(run_id) is None:
        return _error(404, f"no run {run_id!r} in {dash.root}")
    # (a run just launched has no directory yet: its launch record stands for it)
    return _json(await asyncio.to_thread(dash.index.detail, run_id))


async def api_log(request: Request) -> Response:
    dash = _dash(request)
    run_id = request.path_params["run_id"]
    if not NAME_RE.match(run_id) or dash.only not in (None, run_id):
        return _error(404, "no launch log")
    try:
        text = await asyncio.to_thread(
            read_tail, dash.root / LAUNCH_DIR / f"{run_id}.log", dash.root
        )
    except OSError:
        return _error(404, "no launch log (the run was not started by this dashboard)")
    return Response(text, media_type="text/plain; charset=utf-8")


async def _metrics_events(request: Request, dash: Dashboard, run_id: str, path: Path):
    """The event stream of a run: ``header``, ``rows`` (appended), ``reset`` (rewritten),
    ``status`` (every :data:`STATUS_EVERY_S`)."""
    offset, key, header = 0, None, None
    last_status = 0.0
    yield "retry: 1000\n\n"
    while not dash.stopping:
        if await request.is_disconnected():
            break
        try:
            st = path.stat()
            now_key = (st.st_mtime_ns, st.st_size)
        except OSError:
            now_key = None
        if now_key is not None and now_key != key:
            if st.st_size < offset:  # rewritten by a resume: start over
                offset, header = 0, None
                yield "event: reset\ndata: {}\n\n"
            try:
                head, rows, new_offset = await asyncio.to_thread(
                    metrics_rows, path, offset, dash.root
                )
            except OSError:
                head, rows, new_offset = [], [], offset
            if head and head != header:
                if header is not None:
                    yield "event: reset\ndata: {}\n\n"
                header = head
                yield f"event: header\ndata: {json.dumps(head)}\n\n"
            if rows:
                yield f"event: rows\ndata: {json.dumps(_jsonable(rows), allow_nan=False)}\n\n"
            offset, key = new_offset, now_key
        t = time.monotonic()
        if t - last_status >= STATUS_EVERY_S:
            last_status = t
            s = await asyncio.to_thread(dash.index.safe_summary, run_id, time.time(), None)
            yield f"event: status\ndata: {json.dumps(_jsonable(s), allow_nan=False)}\n\n"
        await asyncio.sleep(POLL_S)


async def api_events(request: Request) -> Response:
    dash, run_id, d = _target(request)
    if isinstance(d, Response):
        return d
    return StreamingResponse(
        _metrics_events(request, dash, run_id, d / "metrics.csv"),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def api_comparison(request: Request) -> Response:
    dash, comp_id, d = _target(request, "comp_id", in_root=True)
    if isinstance(d, Response):
        return d
    return _json(await asyncio.to_thread(dash.index.comparison, comp_id))


#: docs/*.md beside the package (a source checkout or an editable install): the launch
#: form's help links open them in the page, offline
DOCS = Path(__file__).resolve().parents[2] / "docs"
_DOC_RE = re.compile(r"^[a-z_]{1,40}\.md\Z")


async def api_doc(request: Request) -> Response:
    """One of snrl's own docs (``docs/<name>.md``) as text; nothing else is served."""
    name = request.path_params["name"]
    path = DOCS / name
    if not _DOC_RE.match(name) or not path.is_file():
        return _error(404, f"no doc {name!r} (the docs ship with a source checkout: docs/)")
    return _json({"name": name, "text": await asyncio.to_thread(path.read_text, "utf-8")})


# ---------------------------------------------------------------------- the form, launches
async def api_schema(request: Request) -> Response:
    return _json({name: schema(cls) for name, cls in algo_classes().items()})


def _form(dash: Dashboard, body: dict[str, Any]) -> tuple[str, str, dict, dict[str, str]]:
    algo = body.get("algo", "ppo")
    name = body.get("name", "")
    values = body.get("values", {})
    errors: dict[str, str] = {}
    if not isinstance(algo, str):
        algo, errors["algo"] = "", "algo must be text (ppo, a2c or dqn)"
    if not isinstance(values, dict):
        values, errors[FORM_ERROR] = {}, "values must be a JSON object of field: text"
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors["name"] = (
            f"run name {name!r} refused (letters, digits, '.', '_', '-'; at most 100; "
            "it names the directory RUNS_DIR/<name>)"
        )
    elif (dash.root / name).exists() or name in dash.launcher.running():
        errors["name"] = f"{dash.root / name} exists (choose another run name)"
    return algo, name, values, errors


def launch_refused(dash: Dashboard) -> str:
    """Why a dashboard of one run directory launches nothing."""
    return (
        f"this dashboard shows the one run {dash.only} (snrl dashboard RUN_DIR); to launch "
        f"runs, serve the folder that holds them: snrl dashboard {dash.root}"
    )


async def api_validate(request: Request) -> Response:
    dash = _dash(request)
    body = await dash.body(request)
    if isinstance(body, Response):
        return body
    algo, name, values, errors = _form(dash, body)
    if not body.get("name"):
        errors.pop("name", None)  # validating the config alone
    cfg, _items, cfg_errors = await asyncio.to_thread(validate, algo, values)
    errors.update(cfg_errors)
    return _json({"ok": not errors, "errors": errors}, 200 if not errors else 422)


async def api_launch(request: Request) -> Response:
    dash = _dash(request)
    body = await dash.body(request)
    if isinstance(body, Response):
        return body
    if dash.only is not None:
        return _error(409, launch_refused(dash))
    algo, name, values, errors = _form(dash, body)
    cfg, items, cfg_errors = await asyncio.to_thread(validate, algo, values)
    errors.update(cfg_errors)
    if errors:
        return _json({"ok": False, "errors": errors}, 422)
    env_token = body.get("env_token")
    extra = {}
    if isinstance(env_token, str) and env_token:
        from snrl.envs.remote import TOKEN_ENV_VAR

        if "\x00" in env_token or len(env_token) > 4096:
            return _json({"ok": False, "errors": {FORM_ERROR: "env_token refused"}}, 422)
        extra[TOKEN_ENV_VAR] = env_token  # in the environment, never on a command line
    from snrl.config import config_to_dict

    try:
        rec = dash.launcher.train(name, algo, items, config=config_to_dict(cfg), env=extra)
    except TooManyRuns as e:
        return _error(429, str(e))
    return _json({"ok": True, "id": name, "pid": rec["pid"], "argv": rec["argv"]}, 201)


async def api_stop(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    if not _dash(request).launcher.stop(run_id):
        return _error(409, f"{run_id} has no running process started by this dashboard")
    return _json({"ok": True, "signal": "SIGINT"})


async def api_resume(request: Request) -> Response:
    dash, run_id, d = _target(request, in_root=True)
    if isinstance(d, Response):
        return d
    if not (d / "checkpoints" / "last.pt").is_file():
        return _error(409, f"{run_id} has no checkpoints/last.pt (nothing to resume)")
    if not NAME_RE.match(run_id):
        return _error(409, "resume runs at the top of RUNS_DIR only (use snrl train)")
    try:
        rec = dash.launcher.resume(run_id)
    except TooManyRuns as e:
        return _error(429, str(e))
    return _json({"ok": True, "id": run_id, "pid": rec["pid"]}, 201)


async def api_render(request: Request) -> Response:
    dash, run_id, d = _target(request, in_root=True)
    if isinstance(d, Response):
        return d
    body = await dash.body(request)
    if isinstance(body, Response):
        return body
    seed = body.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**31:
        return _error(422, "seed must be an integer in [0, 2**31)")
    fmt = body.get("format", "mp4")
    if fmt not in ("mp4", "gif"):
        return _error(422, "format must be mp4 or gif")
    if not (d / "checkpoints" / "best.pt").is_file():
        return _error(409, f"{run_id} has no checkpoints/best.pt yet (train first)")
    out = d / f"render_seed{seed}.{fmt}"
    if out.exists():
        return _error(409, f"{out.name} exists already")
    try:
        rec = dash.launcher.render(run_id, out, seed)
    except TooManyRuns as e:
        return _error(429, str(e))
    except UserError as e:
        return _error(409, str(e))
    return _json({"ok": True, **rec}, 201)


ROUTES = [
    Route("/", guarded(index)),
    Route("/static/{name}", guarded(static)),
    Route("/api/runs", guarded(api_runs)),
    Route("/api/schema", guarded(api_schema)),
    Route("/api/validate", guarded(api_validate), methods=["POST"]),
    Route("/api/launch", guarded(api_launch), methods=["POST"]),
    Route("/api/run/{run_id:path}/events", guarded(api_events)),
    Route("/api/run/{run_id:path}/stop", guarded(api_stop), methods=["POST"]),
    Route("/api/run/{run_id:path}/resume", guarded(api_resume), methods=["POST"]),
    Route("/api/run/{run_id:path}/render", guarded(api_render), methods=["POST"]),
    Route("/api/run/{run_id:path}", guarded(api_run)),
    Route("/api/log/{run_id}", guarded(api_log)),
    Route("/api/comparison/{comp_id:path}", guarded(api_comparison)),
    Route("/api/doc/{name}", guarded(api_doc)),
    Route("/files/{path:path}", guarded(api_files)),
]


class _Headers:
    """ASGI middleware: :data:`COMMON_HEADERS` on every answer (the router's own 404 and
    405 included)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.lower().encode("latin-1"), v.encode("latin-1"))
                    for k, v in COMMON_HEADERS.items()
                    if k.lower().encode("latin-1") not in have
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(runs_dir: str | os.PathLike, *, token: str, max_runs: int = 2) -> Starlette:
    """The dashboard's ASGI app over ``runs_dir`` (what :func:`snrl.dashboard.serve` runs).

    Args:
        runs_dir: RUNS_DIR: the directory whose runs are shown and where launched runs go.
        token: The token every request must carry.
        max_runs: Most processes the page may start at once.
    """
    from starlette.middleware import Middleware

    app = Starlette(routes=ROUTES, middleware=[Middleware(_Headers)])
    app.state.dashboard = Dashboard(Path(runs_dir), token, max_runs)
    return app


_TOKEN_RE = re.compile(r"^[A-Za-z0-9._~-]{16,256}\Z")


def check_token(token: str) -> str:
    """``token`` if it may be used (URL-safe text, 16 to 256 characters).

    Raises:
        UserError: If it may not.
    """
    if not isinstance(token, str) or not _TOKEN_RE.match(token):
        raise UserError(
            "the token must be 16 to 256 URL-safe characters (letters, digits, . _ ~ -; "
            "leave --token out to have one generated)"
        )
    return token

"""``snrl dashboard``: a local web page over the run directories the CLI writes.

It lists the runs of RUNS_DIR (sortable, filterable), shows one run live (learning curve,
evaluations, losses, spike rates, config, videos, analysis figures), launches ``snrl train``
runs from a form generated from the config classes, and shows comparison directories.
Everything it shows is read from disk; a launched run is an ordinary ``snrl train`` process.

Needs the ``[dashboard]`` extra (Starlette, uvicorn, plotly): ``pip install -e '.[dashboard]'``.
See docs/dashboard.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from snrl.config import check_host
from snrl.errors import UserError

__all__ = [
    "LOOPBACK",
    "create_app",
    "missing_extra",
    "require_extra",
    "runs_dir_off_sys_path",
    "serve",
]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_INSTALL = "pip install -e '.[dashboard]'"


def missing_extra() -> str | None:
    """The first package of the ``[dashboard]`` extra that cannot be imported, or None."""
    for module in ("starlette", "uvicorn", "plotly"):
        try:
            __import__(module)
        except ImportError:
            return module
    return None


def require_extra() -> None:
    """Raise :class:`UserError` naming the install line when a package of the extra is
    missing."""
    module = missing_extra()
    if module is not None:
        raise UserError(f"the dashboard needs {module} ({_INSTALL})")


@contextlib.contextmanager
def runs_dir_off_sys_path(root: str | os.PathLike) -> Iterator[list[str]]:
    """While inside, ``sys.path`` holds no entry in RUNS_DIR (``""`` counts as the working
    directory): the dashboard imports modules lazily, and ``python -m snrl.cli dashboard .``
    started inside RUNS_DIR would put a run folder first on its path. Yields the entries
    taken out; they are put back on exit.
    """
    from snrl.dashboard.runs import inside

    def within(entry: str) -> bool:
        if entry and not os.path.isdir(entry):  # no folder (a path hook's name, a zip file)
            return False
        return inside(entry or os.getcwd(), root)

    removed = [(i, p) for i, p in enumerate(sys.path) if isinstance(p, str) and within(p)]
    for i, _ in reversed(removed):
        del sys.path[i]
    try:
        yield [p for _, p in removed]
    finally:
        for i, p in removed:
            sys.path.insert(i, p)


def create_app(runs_dir: str | os.PathLike, *, token: str, max_runs: int = 2) -> Any:
    """The dashboard's ASGI app (see :func:`snrl.dashboard.app.create_app`)."""
    require_extra()
    from snrl.dashboard.app import check_token
    from snrl.dashboard.app import create_app as _create

    return _create(runs_dir, token=check_token(token), max_runs=max_runs)


def serve(
    runs_dir: str | os.PathLike = "runs",
    *,
    host: str = "127.0.0.1",
    port: int = 8770,
    token: str | None = None,
    max_runs: int = 2,
    out: Any = None,
) -> None:
    """Serve the dashboard in the foreground until Ctrl-C (what ``snrl dashboard`` runs).

    Prints the URL with the token (a new one from :mod:`secrets` unless given) to ``out``
    (default stdout); warns on stderr when ``host`` is not a loopback address.

    Raises:
        UserError: RUNS_DIR missing, the extra missing, a bad token, host or port.
    """
    check_host(host)
    out = out or sys.stdout
    root = Path(runs_dir)
    if not root.is_dir():
        module = missing_extra()  # the install line only where the extra is missing
        extra = f"; the dashboard also needs {module}: {_INSTALL}" if module else ""
        raise UserError(
            f"runs directory {root} does not exist (pass the directory that holds your runs, "
            f"or one run directory: what `snrl train --out` wrote{extra})"
        )
    require_extra()
    import uvicorn

    from snrl.dashboard.runs import found_instead

    token = token if token is not None else secrets.token_urlsafe(24)
    app = create_app(root, token=token, max_runs=max_runs)
    if host not in LOOPBACK:
        print(
            f"warning: serving on {host}, reachable from other machines: anyone with the token "
            "can read the runs and start processes as you, and plain HTTP sends the token "
            "unencrypted (use an SSH tunnel to 127.0.0.1 instead)",
            file=sys.stderr,
        )
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)

    import asyncio

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.05)
        bound = server.servers[0].sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        dash = app.state.dashboard
        where = f"#/run/{quote(dash.only)}" if dash.only is not None else ""
        if dash.only is not None:
            print(f"snrl dashboard of the run {root.resolve()} (its folder alone)", file=out)
        else:
            print(f"snrl dashboard of {root.resolve()}", file=out)
            runs, comparisons = dash.index.scan()
            if not runs and not comparisons:
                print(found_instead(dash.root), file=out)
        print(f"open http://{shown}:{bound}/?token={token}{where}  (Ctrl-C stops)", file=out)
        out.flush()
        while not server.should_exit:  # then end the event streams, so shutdown is quick
            await asyncio.sleep(0.2)
        app.state.dashboard.stopping = True

    async def run() -> None:
        task = asyncio.create_task(announce())
        await server.serve()
        task.cancel()
        if not server.started:
            raise UserError(f"cannot serve on {host}:{port} (is the port in use? pass --port)")

    try:
        with runs_dir_off_sys_path(root):
            asyncio.run(run())
    except SystemExit:  # uvicorn exits when it cannot bind
        raise UserError(
            f"cannot serve on {host}:{port} (is the port in use? pass --port)"
        ) from None

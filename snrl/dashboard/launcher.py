"""The processes the dashboard starts: ``snrl train`` (fresh or ``--resume``) and
``snrl render``, each an ordinary ``snrl`` command spawned with an argument list (never a
shell), its output going to a log in ``RUNS_DIR/.snrl-dashboard/``.

A run directory holds only what snrl writes (snrl.training.rundir refuses to start a run in
a directory holding other files), so the log and the launch record live beside the runs,
in the dashboard's own folder. At most ``max_runs`` processes run at once.

What a child imports: only installed packages and the ``PYTHONPATH`` the user set, never a
run folder. ``python -c`` puts its working directory first on ``sys.path``; a run folder
named like a module (``RUNS_DIR/json/__init__.py``) would then be imported by every process
the dashboard starts, and ``env=plain.evilmod:Env`` would import ``RUNS_DIR/plain/evilmod.py``.
So the child's first statement removes that entry (before any import: ``sys`` is built in),
it runs in :data:`CHILD_CWD`, not RUNS_DIR, and :func:`child_env` rewrites ``PYTHONPATH`` to
absolute entries outside RUNS_DIR and sets ``PYTHONSAFEPATH`` for the Pythons it starts. Not
``python -I``: it also drops ``PYTHONPATH`` and the user's site-packages, which a
development setup (``PYTHONPATH=checkout``, ``pip install --user``) needs to import snrl at
all; not ``-P``: it needs Python 3.11 and snrl runs on 3.10. Env modules follow the CLI's
rule (:func:`snrl.envs.make.check_env_id_trusted`): the form's ``env`` is typed by the user,
as ``snrl train --env``; Resume and Render read the env from the run's files, and the
dashboard never passes ``--trust-env-module``, so a ``module:Class`` env named there is
refused by the child with the CLI's message.

Stopping a run sends SIGINT, what Ctrl-C sends: ``snrl train`` unwinds, keeps its last
checkpoint and exits with 130, so the run stays resumable (docs/reliability.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from snrl.dashboard.runs import LAUNCH_DIR, inside, loads_bounded, read_capped
from snrl.errors import UserError
from snrl.io import write_json_atomic

__all__ = ["CHILD_CWD", "Launcher", "TooManyRuns", "child_env", "snrl_argv"]

#: The child's program: the ``snrl`` command (snrl.cli.main), with its working directory
#: taken off ``sys.path`` first (see above) and SIGINT turned back into
#: KeyboardInterrupt first. A dashboard started in the background (``nohup``, ``&`` in a
#: script) ignores SIGINT, a child inherits an ignored signal, and Python installs its Ctrl-C
#: handler only where SIGINT is not ignored at start: Stop would then do nothing. (Not
#: ``preexec_fn``: it is unsafe in a process with threads, as the server is.)
_CHILD = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from snrl.cli import main; sys.exit(main())"
)


#: The working directory of a child: the file system's root, a folder no user writes into,
#: never RUNS_DIR (a grandchild Python started with ``-c``, as multiprocessing's ``spawn``
#: starts one, would put its working directory first on its path); every path a child gets
#: is absolute.
CHILD_CWD = os.path.abspath(os.sep)


def snrl_argv(*args: str) -> list[str]:
    """The argument list of ``snrl ARGS...`` run by this Python (no shell)."""
    return [sys.executable, "-c", _CHILD, *args]


def child_env(
    root: Path, extra: dict[str, str] | None = None, base: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a process the dashboard starts: ``base`` (default: the
    dashboard's own), ``PYTHONUNBUFFERED=1``, ``PYTHONSAFEPATH=1``, ``extra``; its
    ``PYTHONPATH`` keeps the
    entries the user set, made absolute (a relative one meant the dashboard's working
    directory, not RUNS_DIR's), without empty ones and without any inside RUNS_DIR."""
    env = dict(os.environ if base is None else base)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PYTHONSAFEPATH"] = "1"  # Python >= 3.11: no working directory on any descendant's path
    env.update(extra or {})
    if "PYTHONPATH" in env:
        kept = []
        for entry in env["PYTHONPATH"].split(os.pathsep):
            if not entry:
                continue
            path = os.path.abspath(entry)
            if inside(path, root):
                continue
            kept.append(path)
        env["PYTHONPATH"] = os.pathsep.join(kept)
        if not kept:
            del env["PYTHONPATH"]
    return env


class TooManyRuns(Exception):
    """More processes than ``max_runs`` would run at once."""


class Launcher:
    """Starts, tracks and stops the dashboard's processes.

    Args:
        root: RUNS_DIR.
        max_runs: Most processes (trainings and renders) running at once.
    """

    def __init__(self, root: Path, max_runs: int = 2):
        self.root = root
        self.max_runs = max_runs
        self._procs: dict[str, subprocess.Popen] = {}  # key: run id (or "render:<id>")
        self._lock = threading.Lock()

    @property
    def log_dir(self) -> Path:
        return self.root / LAUNCH_DIR

    def running(self) -> list[str]:
        """Keys of the processes still alive (finished ones are reaped)."""
        with self._lock:
            for key, p in list(self._procs.items()):
                if p.poll() is not None:
                    self._record_exit(key, p.returncode)
                    del self._procs[key]
            return list(self._procs)

    def alive(self, run_id: str) -> bool | None:
        """True while this dashboard's training process of ``run_id`` runs; False when it
        launched one that ended; None when it never launched one."""
        if run_id in self.running():
            return True
        return False if (self.log_dir / f"{run_id}.json").is_file() else None

    def _record_exit(self, key: str, code: int) -> None:
        if key.startswith("render:"):
            return
        path = self.log_dir / f"{key}.json"
        try:
            rec = loads_bounded(read_capped(path, self.root))
            rec["returncode"] = code
            rec["ended"] = time.time()
            write_json_atomic(path, rec)
        except (OSError, ValueError, TypeError):
            pass

    def _spawn(self, key: str, argv: list[str], log: Path, env: dict[str, str]) -> int:
        if key in self.running():
            raise UserError(f"{key} already has a process running (wait for it or stop it)")
        n = len(self.running())
        if n >= self.max_runs:
            raise TooManyRuns(
                f"{n} runs are already running, the most this dashboard starts at once "
                f"(stop one, wait for one to finish, or restart it with --max-runs N)"
            )
        self.log_dir.mkdir(exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen(  # an argument list, no shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=CHILD_CWD,
                start_new_session=True,  # Ctrl-C on the dashboard leaves the runs running
            )
        with self._lock:
            self._procs[key] = proc
        return proc.pid

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        return child_env(self.root, extra)

    def train(
        self,
        name: str,
        algo: str,
        items: list[str],
        *,
        config: dict[str, Any],
        env: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Start ``snrl train --algo ALGO --out RUNS_DIR/NAME --set ITEM ...``."""
        out = self.root / name
        argv = snrl_argv("train", "--algo", algo, "--out", str(out))
        for item in items:
            argv += ["--set", item]
        argv.append("--quiet")
        return self._start(name, argv, algo=algo, config=config, env=env)

    def resume(self, run_id: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Start ``snrl train --out RUNS_DIR/RUN --resume``."""
        argv = snrl_argv("train", "--out", str(self.root / run_id))
        argv += ["--resume", "--quiet"]
        return self._start(run_id, argv, algo=None, config=None, env=env)

    def _start(self, run_id, argv, *, algo, config, env) -> dict[str, Any]:
        log_name = f"{run_id}.log"
        rec_path = self.log_dir / f"{run_id}.json"
        self.log_dir.mkdir(exist_ok=True)
        pid = self._spawn(run_id, argv, self.log_dir / log_name, self._env(env))
        rec: dict[str, Any] = {
            "argv": ["snrl", *argv[3:]],
            "pid": pid,
            "started": time.time(),
            "log": log_name,
        }
        if algo is not None:
            rec.update(algo=algo, config=config)
        elif rec_path.is_file():  # a resume keeps what the launch recorded
            try:
                old = loads_bounded(read_capped(rec_path, self.root))
                if isinstance(old.get("algo"), str) and isinstance(old.get("config"), dict):
                    rec.update(algo=old["algo"], config=old["config"])
            except (OSError, ValueError, AttributeError):
                pass
        write_json_atomic(rec_path, rec)
        return rec

    def render(self, run_id: str, out: Path, seed: int) -> dict[str, Any]:
        """Start ``snrl render RUNS_DIR/RUN --out OUT --seed S``."""
        argv = snrl_argv("render", str(self.root / run_id))
        argv += ["--out", str(out), "--seed", str(seed)]
        log = self.log_dir / f"{run_id.replace('/', '__')}.render.log"
        pid = self._spawn(f"render:{run_id}", argv, log, self._env(None))
        return {"pid": pid, "out": out.name}

    def stop(self, run_id: str, sig: int = signal.SIGINT) -> bool:
        """Send ``sig`` (default SIGINT: it keeps its checkpoint) to the process of
        ``run_id`` (a training; ``render:<id>`` for a render). False when none runs."""
        with self._lock:
            proc = self._procs.get(run_id)
        if proc is None or proc.poll() is not None:
            return False
        proc.send_signal(sig)
        return True

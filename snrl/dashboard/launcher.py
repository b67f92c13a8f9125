"""The processes the dashboard starts: ``snrl train`` (fresh or ``--resume``) and
``snrl render``, each an ordinary ``snrl`` command spawned with an argument list (never a
shell), its output going to a log in ``RUNS_DIR/.snrl-dashboard/``.

A run directory holds only what snrl writes (snrl.training.rundir refuses to start a run in
a directory holding other files), so the log and the launch record live beside the runs,
in the dashboard's own folder. At most ``max_runs`` processes run at once.

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

from snrl.dashboard.runs import LAUNCH_DIR
from snrl.errors import UserError
from snrl.io import write_json_atomic

__all__ = ["Launcher", "TooManyRuns", "snrl_argv"]

#: The child's program: the ``snrl`` command (snrl.cli.main), with SIGINT turned back into
#: KeyboardInterrupt first. A dashboard started in the background (``nohup``, ``&`` in a
#: script) ignores SIGINT, a child inherits an ignored signal, and Python installs its Ctrl-C
#: handler only where SIGINT is not ignored at start: Stop would then do nothing. (Not
#: ``preexec_fn``: it is unsafe in a process with threads, as the server is.)
_CHILD = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from snrl.cli import main; sys.exit(main())"
)


def snrl_argv(*args: str) -> list[str]:
    """The argument list of ``snrl ARGS...`` run by this Python (no shell)."""
    return [sys.executable, "-c", _CHILD, *args]


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
            import json

            rec = json.loads(path.read_text(encoding="utf-8"))
            rec["returncode"] = code
            rec["ended"] = time.time()
            write_json_atomic(path, rec)
        except (OSError, ValueError):
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
                cwd=self.root,
                start_new_session=True,  # Ctrl-C on the dashboard leaves the runs running
            )
        with self._lock:
            self._procs[key] = proc
        return proc.pid

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(extra or {})
        return env

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
            import json

            try:
                old = json.loads(rec_path.read_text(encoding="utf-8"))
                rec.update({k: old[k] for k in ("algo", "config") if k in old})
            except (OSError, ValueError):
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

"""Running the `snrl` command in tests: as a subprocess (as a user would) or in this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def snrl(*args, timeout=300):
    """``snrl ARGS`` in a subprocess from the repo root."""
    return subprocess.run(
        [sys.executable, "-m", "snrl.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
        cwd=ROOT,
    )


def snrl_inproc(capsys, *args):
    """The same command through ``snrl.cli.main`` in this process (fast, for error paths)."""
    from snrl.cli import main

    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:  # argparse errors
        rc = e.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out, err)


def train_tiny_pdm(run):
    """``snrl train`` of an 8-neuron PerceptualDecisionMaking run of 256 steps into ``run``
    (a trial task's run for the analysis commands' CLI tests); asserts it exited 0."""
    res = snrl(
        "train", "--env", "PerceptualDecisionMaking-v0", "--hidden", "8", "--steps", 256,
        "--out", run, "--set", "eval_episodes=1", "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return run


def assert_user_error(res, fragment):
    """Exit code 2 and one ``error:`` line (no traceback) that contains ``fragment``."""
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr
    assert fragment in lines[0], lines[0]


def ctrl_c_works() -> None:
    """``preexec_fn`` for a child that a test will send SIGINT (Ctrl-C): a shell that starts
    this test run in the background ignores SIGINT, the child would inherit that, and Python
    turns SIGINT into KeyboardInterrupt only where it is not ignored at start."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)

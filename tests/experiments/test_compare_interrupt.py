"""SIGINT stops `snrl compare` on the local backend: no queued run starts and the command
ends with 130 (the pool used to run every queued run before the command could exit)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from tests.cli_run import ctrl_c_works
from tests.experiments.test_compare import ENV, ROOT, tiny_mlp_compare


@pytest.mark.slow
def test_sigint_stops_the_comparison_and_starts_no_queued_run(tmp_path):
    out = tmp_path / "cmp"
    args = tiny_mlp_compare(out, seeds=4, steps=200_000)
    proc = subprocess.Popen(args, env=ENV, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_works, start_new_session=True)  # fmt: skip
    first = out / "runs" / "mlp__seed0" / "metrics.csv"
    deadline = time.time() + 120  # a hang guard, not a timing claim
    while time.time() < deadline and not first.exists():
        time.sleep(0.05)
    assert first.exists(), "the first run did not start"
    time.sleep(1.0)  # into the run
    # SIGINT to the command alone (kill -INT PID; its workers do not see it). A terminal's
    # Ctrl-C, which reaches the whole process group, stopped it within seconds in 7 of 8
    # tries; one (under pytest) left the parent waiting: not yet understood, not tested here.
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        import os

        left = subprocess.run(["ps", "-o", "pid,stat,args", "-g", str(proc.pid)],
                              capture_output=True, text=True).stdout  # fmt: skip
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"snrl compare kept running after Ctrl-C (the queued runs went on):\n{left}")
    assert proc.returncode == 130, err
    assert "interrupted (run the same command again to resume)" in err
    assert not (out / "runs" / "mlp__seed3").exists()  # queued runs never started
    assert not (out / "status" / "mlp__seed0.json").exists()  # stopped, not recorded as done

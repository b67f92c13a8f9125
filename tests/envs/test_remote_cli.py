"""`snrl serve-env` and `snrl train --env http://...` as a user runs them: a server killed
mid-run stops training with one `error:` line and last.pt kept; `--resume` continues once
the server is back."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_run import ctrl_c_works

pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from snrl.cli import main  # noqa: E402
from snrl.envs.remote import RemoteEnv, RemoteEnvError  # noqa: E402
from snrl.envs.remote_server import EnvServer, announce  # noqa: E402
from snrl.training.checkpoint import load_checkpoint  # noqa: E402
from snrl.training.metrics import read_metrics  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "SNRL_ENV_TOKEN": TOKEN}
SNRL = [sys.executable, "-m", "snrl.cli"]


def _serve(
    port: int = 0, env: dict | None = None, args: tuple = ()
) -> tuple[subprocess.Popen, str, str]:
    """Start `snrl serve-env CartPole-v1`; returns the process, its URL and its stdout so far."""
    proc = subprocess.Popen(
        [*SNRL, "serve-env", "CartPole-v1", "--port", str(port), *args],
        env=env or ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_works,  # one test stops the server with SIGINT (Ctrl-C)
    )
    lines = [proc.stdout.readline() for _ in range(2)]
    m = re.search(r"at (http://127\.0\.0\.1:\d+) ", lines[0])
    assert m, lines
    return proc, m.group(1), "".join(lines)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=30)
    finally:
        proc.stdout.close()
        proc.stderr.close()


def test_serve_env_prints_a_generated_token_and_stops_cleanly():
    env = {k: v for k, v in ENV.items() if k != "SNRL_ENV_TOKEN"}
    limits = ("--max-client-sessions", "1", "--idle-timeout", "600", "--max-connections", "40")
    proc, url, out = _serve(env=env, args=limits)
    token = re.search(r"token: (\S+)", out)
    assert token and len(token.group(1)) >= 32
    first = RemoteEnv(url, token=token.group(1))  # the flags reach the server
    with pytest.raises(RemoteEnvError, match=r"holds 1 sessions.*--max-client-sessions 1"):
        RemoteEnv(url, token=token.group(1))
    first.close()
    assert _stop(proc, signal.SIGINT) == 0


def test_a_given_token_is_never_printed_and_other_hosts_warn(capsys):
    server = EnvServer("CartPole-v1", token=TOKEN)
    announce(server, generated=False, out=sys.stdout)
    announce(server, generated=True, out=sys.stdout)
    out = capsys.readouterr().out
    assert out.count(TOKEN) == 1 and out.count("token:") == 1
    server.host = "0.0.0.0"
    announce(server, generated=False, out=sys.stdout)
    assert capsys.readouterr().err.startswith("warning: serving on 0.0.0.0")
    server.stop()


def test_serve_env_user_errors_are_one_line(capsys):
    assert main(["serve-env", "NoSuchEnv-v0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown env id") and err.count("\n") == 1
    assert main(["serve-env", "CartPole-v1", "--port", "0", "--token", "short"]) == 2
    assert "at least 16" in capsys.readouterr().err


def test_train_stops_when_the_server_dies_and_resumes_when_it_is_back(tmp_path, monkeypatch):
    server = EnvServer("CartPole-v1", token=TOKEN).start()  # in this process: one start less
    url = server.url
    run = tmp_path / "run"
    args = ["--backbone", "mlp", "--hidden", "16", "--set", "checkpoint_interval=1"]
    args += ["--set", "eval_interval=0", "--set", "eval_episodes=2", "--quiet", "--out", str(run)]
    train = subprocess.Popen(
        [*SNRL, "train", "--env", url, "--steps", "1000000", *args],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        last = run / "checkpoints" / "last.pt"
        deadline = time.monotonic() + 120
        while not last.exists() and train.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert last.exists(), train.communicate(timeout=30)
        server.stop()  # the server goes away mid-run
        _, err = train.communicate(timeout=120)
    finally:
        server.stop()
        if train.poll() is None:
            train.kill()
            train.wait()
    assert train.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: env server {url} did not"), err
    assert "--resume" in lines[0]
    step = int(load_checkpoint(last)["counters"]["env_step"])
    assert step >= 256

    monkeypatch.setenv("SNRL_ENV_TOKEN", TOKEN)
    with EnvServer("CartPole-v1", token=TOKEN, port=server.port):  # back, at the same address
        argv = ["train", "--out", str(run), "--resume", "--steps", str(step + 512), "--quiet"]
        assert main(argv) == 0
    assert read_metrics(run / "metrics.csv")["env_step"][-1] == step + 512


def test_train_on_a_server_that_is_not_there_is_one_error_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SNRL_ENV_TOKEN", TOKEN)
    with EnvServer("CartPole-v1", token=TOKEN) as server:
        url = server.url
    out = tmp_path / "run"
    assert main(["train", "--env", url, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: env server {url} did not create a session: cannot connect")
    assert err.count("\n") == 1 and not out.exists()


#: (argv, the start of the one error line); the first three run as processes, the rest
#: in-process (each process costs seconds of torch import).
MISTAKES = [
    (["train", "--env", "http://127.0.0.1:abc"], "error: env URL 'http://127.0.0.1:abc' does"),
    (
        ["train", "--env", "http://127.0.0.1:1", "--env-kwargs", '{"timeout": "5"}'],
        "error: remote env option timeout='5'",
    ),
    (
        ["train", "--env", "FrozenLake-v1", "--env-kwargs", '{"map_name": "99x99"}'],
        "error: env FrozenLake-v1 failed with the arguments {'map_name': '99x99'}: KeyError",
    ),
    (["train", "--env", "http://[::1"], "error: env URL 'http://[::1' does not parse"),
    (["train", "--env", "http://①②⑦.0.0.1:8765"], "error: env URL 'http://①②⑦.0.0.1:8765' holds"),
    (["train", "--env", "http://127.0.0.1:87\t65"], "error: env URL 'http://127.0.0.1:87\\t65'"),
    (
        ["train", "--env", "http://127.0.0.1:1", "--env-kwargs", '{"timeout": 1e308}'],
        "error: remote env option timeout=1e+308",
    ),
    (
        ["train", "--env", "http://127.0.0.1:1", "--env-kwargs", '{"retries": null}'],
        "error: remote env option retries=None",
    ),
    (
        ["serve-env", "FrozenLake-v1", "--port", "0", "--env-kwargs", '{"map_name": "9x9"}'],
        "error: env FrozenLake-v1 failed with the arguments {'map_name': '9x9'}: KeyError",
    ),
]


def _train_args(argv: list[str], out: Path) -> list[str]:
    return [*argv, "--steps", "64", "--quiet", "--out", str(out)] if argv[0] == "train" else argv


@pytest.mark.parametrize("argv, message", MISTAKES[:3])
def test_remote_mistakes_are_one_error_line_and_write_nothing(tmp_path, argv, message):
    out = tmp_path / "run"
    proc = subprocess.run(
        [*SNRL, *_train_args(argv, out)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


@pytest.mark.parametrize("argv, message", MISTAKES[3:])
def test_more_remote_mistakes_in_process(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.setenv("SNRL_ENV_TOKEN", TOKEN)
    out = tmp_path / "run"
    assert main(_train_args(argv, out)) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not out.exists()

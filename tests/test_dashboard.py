"""snrl dashboard over HTTP (Starlette's TestClient): token, CSRF header, path traversal,
the form generated from the config classes, validation keyed by field with the CLI's own
message, run status from run directories, comparisons, the concurrent-run limit."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("plotly")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from snrl.agents import A2CConfig, DQNConfig, PPOConfig  # noqa: E402
from snrl.cli import main  # noqa: E402
from snrl.config import NEURON_DEFAULTS, config_to_dict  # noqa: E402
from snrl.dashboard import create_app  # noqa: E402
from snrl.dashboard.forms import schema  # noqa: E402
from snrl.dashboard.runs import LAUNCH_DIR  # noqa: E402
from snrl.experiments.store import write_manifest, write_status  # noqa: E402
from snrl.io import write_json_atomic  # noqa: E402
from snrl.training.metrics import MetricsWriter  # noqa: E402
from snrl.training.rundir import prepare_run_dir  # noqa: E402

TOKEN = "test-token-0123456789abcdef"
H = {"X-SNRL-Token": TOKEN}
COLUMNS = ["env_step", "wall_time", "episode_return_mean", "eval_return_mean", "policy_loss",
           "spike_rate_lif0"]


def make_run(
    root: Path,
    name: str,
    *,
    steps: list[int],
    total: int,
    returns: list[float] | None = None,
    evals: dict[int, float] | None = None,
    last_pt: bool = True,
    age_s: float = 3600.0,
    backbone: str = "lif",
    seed: int = 0,
) -> Path:
    """A run directory as `snrl train` leaves it: manifest, config.json, metrics.csv (with
    snrl's own writer), checkpoints/ (last.pt/best.pt when the run got that far)."""
    d = prepare_run_dir(root / name)
    cfg = PPOConfig(backbone=backbone, total_steps=total, seed=seed, hidden_size=16)
    write_json_atomic(d / "config.json", {"algo": "ppo", **config_to_dict(cfg)})
    returns = returns or [10.0 + i for i in range(len(steps))]
    with MetricsWriter(d / "metrics.csv", COLUMNS) as w:
        for s, r in zip(steps, returns):
            w.append({"env_step": s, "wall_time": s / 1000, "episode_return_mean": r,
                      "eval_return_mean": (evals or {}).get(s, float("nan")),
                      "policy_loss": -0.01, "spike_rate_lif0": 0.1})
    if last_pt:
        (d / "checkpoints" / "last.pt").write_bytes(b"ckpt")
        (d / "checkpoints" / "best.pt").write_bytes(b"ckpt")
    old = time.time() - age_s
    os.utime(d / "metrics.csv", (old, old))
    return d


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    make_run(root, "done", steps=[100, 200, 300], total=300, evals={200: 50.0, 300: 42.0})
    make_run(root, "killed", steps=[100, 200], total=1000)
    make_run(root, "crashed", steps=[100], total=1000, last_pt=False)
    make_run(root, "live", steps=[100, 200], total=1000, age_s=0.0)
    make_run(root / "group", "nested", steps=[100], total=100)
    return root


@pytest.fixture
def client(runs: Path):
    app = create_app(runs, token=TOKEN, max_runs=1)
    with TestClient(app) as c:
        yield c
    launcher = app.state.dashboard.launcher
    for key in launcher.running():  # a test that failed midway leaves no process behind
        launcher.stop(key, signal.SIGTERM)


def by_id(client) -> dict[str, dict]:
    r = client.get("/api/runs", headers=H)
    assert r.status_code == 200
    return {x["id"]: x for x in r.json()["runs"]}


# ---------------------------------------------------------------- token and CSRF
def test_every_request_needs_the_token(client):
    for path in ("/", "/api/runs", "/api/schema", "/files/done/metrics.csv", "/static/app.js",
                 "/api/run/done/events"):
        assert client.get(path).status_code == 401, path
        assert client.get(path + "?token=wrong-token-0000000000").status_code == 403, path
    assert client.get("/api/runs?token=" + TOKEN).status_code == 200
    assert client.get("/api/runs", headers=H).status_code == 200
    page = client.get("/?token=" + TOKEN)
    assert page.status_code == 200 and TOKEN in page.text and "plotly.min.js" in page.text


def test_page_curves_take_the_snrl_palette(client):
    # one palette for figures and dashboard: the page carries snrl.palette's group colours
    import html as html_mod
    import json
    import re

    from snrl.palette import GROUP_COLORS

    page = client.get("/?token=" + TOKEN).text
    m = re.search(r'<body data-palette="([^"]*)">', page)
    assert m is not None
    assert json.loads(html_mod.unescape(m.group(1))) == list(GROUP_COLORS)


def test_state_changing_requests_need_the_header(client, runs):
    body = {"algo": "ppo", "name": "x1", "values": {}}
    # a token in the URL (what a link or a cross-site form can carry) is not enough
    r = client.post("/api/launch?token=" + TOKEN, json=body)
    assert r.status_code == 403 and "X-SNRL-Token" in r.json()["error"]
    r = client.post("/api/launch", data={"algo": "ppo", "name": "x1"})
    assert r.status_code == 403
    r = client.post("/api/launch", json=body, headers={"X-SNRL-Token": "wrong-token-00000000"})
    assert r.status_code == 403
    assert client.post("/api/run/killed/resume?token=" + TOKEN).status_code == 403
    assert not (runs / "x1").exists() and not (runs / LAUNCH_DIR).exists()


# ---------------------------------------------------------------- files
def test_files_under_runs_dir_only(client, runs, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (runs / "done" / "link.txt").symlink_to(secret)
    (runs / "outside").symlink_to(tmp_path)
    ok = client.get("/files/done/metrics.csv", headers=H)
    assert ok.status_code == 200 and ok.text.startswith("env_step,")
    for path in (
        "/files/%2e%2e/secret.txt",
        "/files/done/%2e%2e/%2e%2e/secret.txt",
        "/files/..%2fsecret.txt",
        "/files//etc/passwd",
        "/files/%2fetc%2fpasswd",
        "/files/done/link.txt",
        "/files/outside/secret.txt",
        "/files/done/.snrl-run.json",
        "/api/run/%2e%2e/events",
        "/api/run/%2e%2e",
    ):
        r = client.get(path, headers=H)
        assert r.status_code == 403, path
        assert "secret" not in r.text
    # the server keeps serving
    assert client.get("/files/done/metrics.csv", headers=H).status_code == 200


def test_malformed_and_oversized_requests_get_4xx(client):
    r = client.post("/api/validate", content=b"{not json", headers=H)
    assert r.status_code == 400
    r = client.post("/api/validate", content=b"[1, 2]", headers=H)
    assert r.status_code == 400
    r = client.post("/api/validate", content=b"x" * (300 * 1024), headers=H)
    assert r.status_code == 413
    r = client.post("/api/launch", json={"algo": ["ppo"], "name": 3, "values": []}, headers=H)
    assert r.status_code == 422 and {"algo", "name"} <= set(r.json()["errors"])
    assert client.get("/api/runs", headers=H).status_code == 200


# ---------------------------------------------------------------- run list
def test_run_status_and_columns(client):
    rows = by_id(client)
    assert set(rows) == {"done", "killed", "crashed", "live", "group/nested"}
    assert rows["done"]["status"] == "finished"
    assert rows["killed"]["status"] == "killed-resumable"
    assert rows["crashed"]["status"] == "failed"
    assert rows["live"]["status"] == "running"
    assert rows["group/nested"]["status"] == "finished"
    done = rows["done"]
    assert (done["algo"], done["env"], done["backbone"], done["dale"], done["seed"]) == (
        "ppo", "CartPole-v1", "lif", True, 0)
    assert (done["steps"], done["total_steps"], done["rows"]) == (300, 300, 3)
    assert done["best_eval"] == 50.0  # the max of the evaluation column, not the last one
    assert done["last_return"] == 12.0


def test_run_list_follows_appended_and_rewritten_metrics(client, runs):
    assert by_id(client)["killed"]["steps"] == 200
    with open(runs / "killed" / "metrics.csv", "a") as f:
        f.write("300,0.3,99.0,77.0,-0.01,0.1\n")
        f.write("400,0.4,")  # a torn last line is not a row
    row = by_id(client)["killed"]
    assert (row["steps"], row["rows"], row["best_eval"]) == (300, 3, 77.0)
    # a resume rewrites the file shorter (rows past the checkpoint dropped)
    MetricsWriter.resume(runs / "killed" / "metrics.csv", COLUMNS, upto_env_step=100).close()
    row = by_id(client)["killed"]
    assert (row["steps"], row["rows"], row["best_eval"]) == (100, 1, None)


def test_launch_log_decides_failed_or_interrupted(client, runs):
    launch = runs / LAUNCH_DIR
    launch.mkdir()
    for name, line in (("killed", "error: interrupted by Ctrl-C (the run ...)"),
                       ("done", "error: something")):
        write_json_atomic(launch / f"{name}.json", {"log": f"{name}.log", "returncode": 130})
        (launch / f"{name}.log").write_text(f"progress\n{line}\n")
    make_run(runs, "nan", steps=[100], total=1000)
    # a launch that failed before creating its directory (an env module that does not import)
    write_json_atomic(launch / "noenv.json", {"log": "noenv.log", "returncode": 2,
                                              "algo": "ppo", "config": {"env": "my_envs:Maze"}})
    (launch / "noenv.log").write_text("error: cannot import module 'my_envs' (install it)\n")
    write_json_atomic(launch / "nan.json", {"log": "nan.log", "returncode": 2})
    (launch / "nan.log").write_text("error: the loss is NaN at env step 100 (lower lr)\n")
    rows = by_id(client)
    assert rows["killed"]["status"] == "killed-resumable"
    assert rows["done"]["status"] == "finished"  # reached total_steps: the log does not matter
    assert rows["nan"]["status"] == "failed" and "NaN" in rows["nan"]["reason"]
    assert rows["noenv"]["status"] == "failed" and "my_envs" in rows["noenv"]["reason"]
    assert rows["noenv"]["env"] == "my_envs:Maze"
    assert "nan" not in [p for p in os.listdir(runs) if p.startswith(".")]  # not listed as a run


def test_run_detail_lists_videos_figures_and_analysis(client, runs):
    d = runs / "done"
    (d / "demo.mp4").write_bytes(b"\0")
    (d / "demo.gif").write_bytes(b"GIF89a")
    (d / "learning_curve.png").write_bytes(b"\x89PNG")
    (d / "analysis").mkdir()
    (d / "analysis" / "raster.png").write_bytes(b"\x89PNG")
    write_json_atomic(d / "analysis" / "summary.json", {"episodes": 3})
    info = client.get("/api/run/done", headers=H).json()
    kinds = {f["path"]: f["kind"] for f in info["files"]}
    assert kinds == {"done/demo.gif": "video", "done/demo.mp4": "video",
                     "done/learning_curve.png": "figure", "done/analysis/raster.png": "analysis"}
    assert info["analysis"] == {"episodes": 3}
    assert info["config"]["hidden_size"] == 16


def test_event_stream_sends_header_and_rows(client, runs):
    with client.stream("GET", "/api/run/done/events", headers=H) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events, data = [], []
        for line in r.iter_lines():
            if line.startswith("event: "):
                events.append(line[7:])
            elif line.startswith("data: "):
                data.append(json.loads(line[6:]))
                if events[-1] == "rows":
                    break
    assert events[:2] == ["header", "rows"]
    assert data[0] == COLUMNS
    assert [row[0] for row in data[1]] == [100, 200, 300]
    assert data[1][0][3] is None  # NaN cells are JSON null


# ---------------------------------------------------------------- the form
def test_schema_is_the_config_classes(client):
    got = client.get("/api/schema", headers=H).json()
    assert set(got) == {"ppo", "a2c", "dqn"}
    for algo, cls in (("ppo", PPOConfig), ("a2c", A2CConfig), ("dqn", DQNConfig)):
        fields = {f["name"]: f for f in got[algo]}
        assert list(fields) == [f.name for f in dataclasses.fields(cls) if f.init]
        defaults = config_to_dict(cls())
        assert {k: f["default"] for k, f in fields.items()} == defaults
    ppo = {f["name"]: f for f in got["ppo"]}
    # defaults from the one table, and where an agent overrides it, why
    assert ppo["recurrent_sign"]["default"] == NEURON_DEFAULTS["recurrent_sign"]
    # tau_m departs from the table (20 ms): unset, it takes the task's scale, and says so
    assert ppo["tau_m"]["default"] is None and NEURON_DEFAULTS["tau_m"] is not None
    assert "10 task steps" in ppo["tau_m"]["override"]
    assert ppo["backbone"]["choices"] == ["lif", "alif", "spylif", "mlp", "gru", "lstm"]
    assert ppo["hidden_size"]["min"] == 1 and ppo["lr"]["min"] is None
    assert (ppo["target_kl"]["kind"], ppo["target_kl"]["optional"]) == ("float", True)
    assert ppo["curriculum"]["kind"] == "json" and ppo["env_kwargs"]["kind"] == "json"
    assert ppo["force_dale_law"]["kind"] == "bool"


def test_a_field_added_to_a_config_shows_up():
    @dataclass(frozen=True, kw_only=True)
    class Extended(PPOConfig):
        spike_penalty: float = 0.25
        """Penalty per spike: none | low | high."""

    fields = {f["name"]: f for f in schema(Extended)}
    assert fields["spike_penalty"] == {
        "name": "spike_penalty", "kind": "float", "optional": False, "default": 0.25,
        "type": "float", "doc": "Penalty per spike: none | low | high.", "choices": None,
        "min": None, "override": None}
    assert len(fields) == len(schema(PPOConfig)) + 1


def cli_error(tmp_path, capsys, *sets: str) -> str:
    """The line `snrl train --set ...` prints, minus `error: ` (exit code 2)."""
    capsys.readouterr()
    argv = ["train", "--out", str(tmp_path / "cli-run")]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert not (tmp_path / "cli-run").exists()
    return err[len("error: "):]


def test_validation_errors_are_keyed_by_field_with_the_cli_message(client, tmp_path, capsys):
    values = {"lr": "abc", "gamma": "2", "n_envs": "6", "n_minibatches": "4", "hidden_size": "16"}
    r = client.post("/api/validate", json={"algo": "ppo", "values": values}, headers=H)
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert set(errors) == {"lr", "gamma", "n_minibatches"}
    assert errors["lr"] == cli_error(tmp_path, capsys, "lr=abc")
    assert errors["gamma"] == cli_error(tmp_path, capsys, "gamma=2")
    # a cross-field rule is checked against the other values given (n_envs=6, not 8)
    assert errors["n_minibatches"] == cli_error(tmp_path, capsys, "n_envs=6", "n_minibatches=4")
    assert "n_envs=6" in errors["n_minibatches"]
    bad_lesson = '[{"env_kwargs": {}, "metric": "accuracy", "threshold": 1}]'
    r = client.post("/api/validate", json={"algo": "dqn", "values": {"curriculum": bad_lesson}},
                    headers=H)
    expected = cli_error(tmp_path, capsys, f"curriculum={bad_lesson}")
    assert r.json()["errors"] == {"curriculum": expected}
    r = client.post("/api/validate", json={"algo": "ppo", "values": {"env": "CartPol-v1"}},
                    headers=H)
    assert r.json()["errors"] == {"env": cli_error(tmp_path, capsys, "env=CartPol-v1")}
    assert "did you mean 'CartPole-v1'" in r.json()["errors"]["env"]
    r = client.post("/api/validate", json={"algo": "ppo", "values": {"n_envs": "6"}}, headers=H)
    assert (r.status_code, r.json()) == (200, {"ok": True, "errors": {}})


def test_launch_refuses_bad_names_and_existing_dirs(client, runs):
    for name, why in (("../evil", "refused"), ("", "refused"), ("a/b", "refused"),
                      ("done", "exists")):
        r = client.post("/api/launch", json={"algo": "ppo", "name": name, "values": {}}, headers=H)
        assert r.status_code == 422 and why in r.json()["errors"]["name"], name
    assert not (runs.parent / "evil").exists()


# ---------------------------------------------------------------- launch, limit, stop
def wait_for(cond, timeout=120.0):
    t = time.monotonic()
    while not cond():
        if time.monotonic() - t > timeout:
            raise AssertionError("timed out")
        time.sleep(0.2)


def test_launch_limit_stop_keeps_the_run_resumable(client, runs):
    values = {"total_steps": "1000000", "hidden_size": "8", "n_envs": "2", "n_steps": "16",
              "n_epochs": "1", "eval_interval": "0", "checkpoint_interval": "1"}
    # a dashboard started in the background ignores SIGINT, and its children inherit that:
    # Stop must still reach the run
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        r = client.post("/api/launch", json={"algo": "ppo", "name": "long", "values": values},
                        headers=H)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert r.status_code == 201, r.text
    argv = r.json()["argv"]
    assert argv[:4] == ["snrl", "train", "--algo", "ppo"] and "--set" in argv
    assert "hidden_size=8" in argv
    # max_runs=1: a second launch is refused with a reason, and starts nothing
    r2 = client.post("/api/launch", json={"algo": "ppo", "name": "second", "values": {}},
                     headers=H)
    assert r2.status_code == 429 and "--max-runs" in r2.json()["error"]
    assert not (runs / "second").exists()
    assert by_id(client)["long"]["status"] == "running"
    wait_for(lambda: (runs / "long" / "checkpoints" / "last.pt").is_file())
    rec = json.loads((runs / LAUNCH_DIR / "long.json").read_text())
    r = client.post("/api/run/long/stop", headers=H)
    assert r.status_code == 200 and r.json()["signal"] == signal.SIGINT.name
    wait_for(lambda: by_id(client)["long"]["status"] != "running")
    assert by_id(client)["long"]["status"] == "killed-resumable"
    log = (runs / LAUNCH_DIR / "long.log").read_text()
    assert "interrupted by Ctrl-C" in log and "--resume" in log
    code = json.loads((runs / LAUNCH_DIR / "long.json").read_text())["returncode"]
    output = (runs / LAUNCH_DIR / "long.log").read_text()[-4000:]  # again: after its exit
    assert code == 130, f"return code {code}; the run's output:\n{output}"
    assert rec["algo"] == "ppo" and rec["config"]["hidden_size"] == 8
    assert client.post("/api/run/long/stop", headers=H).status_code == 409
    assert client.post("/api/run/crashed/resume", headers=H).status_code == 409


# ---------------------------------------------------------------- comparisons
def test_comparison_curves_are_the_mean_over_seeds(client, runs):
    d = runs / "cmp"
    d.mkdir()
    write_manifest(d, {"request": {"env": "CartPole-v1", "algo": "ppo", "seeds": 2}})
    (d / "runs").mkdir()
    (d / "status").mkdir()
    for seed, base in ((0, 10.0), (1, 20.0)):
        name = f"lif-s{seed}"
        make_run(d / "runs", name, steps=[100, 200, 300], total=300, seed=seed,
                 returns=[base, base + 10, base + 20])
        write_status(d / "status" / f"{name}.json",
                     {"name": name, "group": "lif", "seed": seed, "status": "done"})
    (d / "summary.csv").write_text("group,final_return_mean\nlif,30.0\n")
    (d / "report.md").write_text("# Comparison\n")
    got = client.get("/api/comparison/cmp", headers=H).json()
    assert [r["name"] for r in got["runs"]] == ["lif-s0", "lif-s1"]
    curve = got["curves"]["lif"]
    assert curve["n_seeds"] == 2
    assert curve["steps"][0] == 100 and curve["steps"][-1] == 300
    assert curve["mean"][0] == pytest.approx(15.0) and curve["mean"][-1] == pytest.approx(35.0)
    assert all(lo <= m <= hi for lo, m, hi in zip(curve["low"], curve["mean"], curve["high"]))
    assert got["summary"] == [["group", "final_return_mean"], ["lif", "30.0"]]
    assert got["report"] == "# Comparison\n"
    assert "cmp" in client.get("/api/runs", headers=H).json()["comparisons"]
    assert "cmp" not in by_id(client)
    # 2 seeds per group: the warning of report.md and curves.png, for the page's plot
    assert got["warning"].startswith("Only 2 seeds per group: the 95% CIs and p-values mean little")
    make_run(d / "runs", "lif-s2", steps=[100, 200, 300], total=300, seed=2)
    assert client.get("/api/comparison/cmp", headers=H).json()["warning"] is None  # 3 seeds


# ---------------------------------------------------------------- the command
def test_cli_missing_dir_and_missing_extra(tmp_path, capsys, monkeypatch):
    assert main(["dashboard", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    # the extra is installed here: the error names the folder, not an install line
    assert err.startswith("error: runs directory") and "pip install" not in err
    assert "or one run directory" in err
    monkeypatch.setitem(__import__("sys").modules, "plotly", None)
    assert main(["dashboard", str(tmp_path / "nope")]) == 2  # now it is missing: said
    assert "needs plotly: pip install -e '.[dashboard]'" in capsys.readouterr().err
    assert main(["dashboard", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: the dashboard needs plotly (pip install -e '.[dashboard]')"
    assert main(["dashboard", str(tmp_path), "--token", "short"]) == 2


# ---------------------------------------------------------------- issue 39
def test_a_run_directory_itself_shows_that_run_only(runs):
    app = create_app(runs / "done", token=TOKEN, max_runs=1)
    with TestClient(app) as c:
        got = c.get("/api/runs", headers=H).json()
        assert [r["id"] for r in got["runs"]] == ["done"] and got["only"] == "done"
        assert got["root"] == str((runs / "done").resolve()) and got["found"] is None
        run = c.get("/api/run/done", headers=H).json()
        assert run["status"] == "finished" and run["steps"] == 300
        assert c.get("/files/done/metrics.csv", headers=H).status_code == 200
        # its siblings in the parent are neither listed nor served
        assert c.get("/api/run/killed", headers=H).status_code == 404
        assert c.get("/files/killed/metrics.csv", headers=H).status_code == 404
        assert c.get("/api/log/killed", headers=H).status_code == 404
        r = c.post("/api/launch", headers=H, json={"algo": "ppo", "name": "x", "values": {}})
        assert r.status_code == 409 and "snrl dashboard " + str(runs.resolve()) in r.json()["error"]
    assert not (runs / "x").exists()


def test_an_empty_list_says_what_the_folder_holds(tmp_path):
    root = tmp_path / "stuff"
    (root / "notes").mkdir(parents=True)
    (root / "a.txt").write_text("x")
    with TestClient(create_app(root, token=TOKEN)) as c:
        got = c.get("/api/runs", headers=H).json()
    assert got["runs"] == [] and got["only"] is None
    assert got["found"] == (
        f"no run in {root.resolve()}: a run is a folder holding config.json (what snrl train "
        "--out DIR writes), at depth 1 or 2; found 1 folder(s) without a run inside: notes; "
        "1 file(s): a.txt"
    )
    with TestClient(create_app(runs_with_one(tmp_path), token=TOKEN)) as c:
        assert c.get("/api/runs", headers=H).json()["found"] is None


def runs_with_one(tmp_path: Path) -> Path:
    root = tmp_path / "one"
    root.mkdir()
    make_run(root, "r", steps=[100], total=100)
    return root


def test_serve_prints_the_run_address_of_a_run_directory(runs, monkeypatch):
    """`snrl dashboard RUN_DIR` prints the address of that run's view."""
    import io

    import uvicorn

    from snrl import dashboard

    out = io.StringIO()

    async def fake_serve(self, *a, **k):  # started, then asked to stop at once
        class _Sock:
            def getsockname(self):
                return ("127.0.0.1", 1234)

        self.servers = [type("S", (), {"sockets": [_Sock()]})()]
        self.started = True
        import asyncio

        await asyncio.sleep(0.3)
        self.should_exit = True
        await asyncio.sleep(0.3)

    monkeypatch.setattr(uvicorn.Server, "serve", fake_serve)
    dashboard.serve(runs / "done", token=TOKEN, port=0, out=out)
    text = out.getvalue()
    assert f"snrl dashboard of the run {(runs / 'done').resolve()}" in text
    assert f"/?token={TOKEN}#/run/done" in text
    empty = runs.parent / "empty"
    empty.mkdir()
    out = io.StringIO()
    dashboard.serve(empty, token=TOKEN, port=0, out=out)  # says why nothing will show
    lines = out.getvalue().splitlines()
    assert lines[1] == (
        f"no run in {empty.resolve()}: it is empty (a run is a folder holding "
        "config.json (what snrl train --out DIR writes))"
    )
    assert lines[2].endswith(f"/?token={TOKEN}  (Ctrl-C stops)")


def test_config_says_which_tuned_entry_was_applied(client, runs):
    import json

    # make_run writes tuned_from as PPOConfig() has it (empty): an old run's config
    assert client.get("/api/run/done", headers=H).json()["tuned"] == (
        'none: snrl/zoo/ppo.toml has no ["CartPole-v1".lif] entry'
    )
    cfg = json.loads((runs / "done" / "config.json").read_text())
    for key, value, note in [
        ("tuned_from", 'snrl/zoo/ppo.toml ["Pendulum-v1".lif]: substeps=2', None),
        ("tuned", False, "off (tuned = false: the built-in defaults and your values)"),
    ]:
        (runs / "done" / "config.json").write_text(json.dumps({**cfg, key: value}))
        assert client.get("/api/run/done", headers=H).json()["tuned"] == (note or value)


def test_docs_are_served_by_name_only(client):
    got = client.get("/api/doc/dashboard.md", headers=H)
    assert got.status_code == 200 and got.json()["text"].startswith("# The dashboard")
    for bad in ("..%2fREADME.md", "dashboard.txt", "nope.md", "%2e%2e.md"):
        assert client.get("/api/doc/" + bad, headers=H).status_code == 404

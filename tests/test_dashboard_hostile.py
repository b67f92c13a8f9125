"""The dashboard against crafted run folders and hostile requests (docs/reliability.md, "The
dashboard"): processes it starts import nothing from RUNS_DIR; run files are served inert
and sandboxed; the token leaves URLs after the first load; FIFOs, devices, huge or sparse
files and deeply nested JSON in a run folder cost bounded time and memory and never break
the run list; nested JSON in a request is a 4xx."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("plotly")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from snrl.dashboard import create_app  # noqa: E402
from snrl.dashboard.app import PAGE_CSP  # noqa: E402
from snrl.dashboard.launcher import child_env  # noqa: E402
from snrl.dashboard.runs import (  # noqa: E402
    LAUNCH_DIR,
    MAX_METRICS_READ,
    NAME_RE,
    RunIndex,
    loads_bounded,
)
from snrl.experiments.store import write_manifest  # noqa: E402
from snrl.io import write_json_atomic  # noqa: E402
from tests.test_dashboard import TOKEN, H, make_run  # noqa: E402


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "runs"
    r.mkdir()
    make_run(r, "done", steps=[100, 200, 300], total=300)
    return r


def client_of(root: Path, max_runs: int = 1) -> TestClient:
    return TestClient(create_app(root, token=TOKEN, max_runs=max_runs))


def in_time(fn, timeout: float = 60.0):
    """``fn()`` run in a thread; fails (instead of hanging the test run) if it blocks."""
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # reported below
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "blocked (a FIFO or a device was opened?)"
    if "error" in out:
        raise out["error"]
    return out["value"]


# ---------------------------------------------------------------- processes started
def plant_modules(root: Path, marker: Path) -> list[str]:
    """Run folders named like modules every snrl process imports, each writing ``marker``
    when imported (what a run folder someone sent you could hold)."""
    code = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    names = ["json", "argparse", "signal", "numpy", "typing_extensions"]
    for name in names:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(code)
    (root / "plain").mkdir()
    (root / "plain" / "__init__.py").write_text(code)
    (root / "plain" / "evilmod.py").write_text(code + "class Env: pass\n")
    (root / "runpy.py").write_text(code)
    return names


def wait_all_ended(app, timeout: float = 240.0) -> None:
    launcher = app.state.dashboard.launcher
    t = time.monotonic()
    while launcher.running():
        if time.monotonic() - t > timeout:
            for key in launcher.running():
                launcher.stop(key, signal.SIGKILL)
            raise AssertionError("the processes did not end")
        time.sleep(0.3)


def test_launch_resume_render_import_nothing_from_runs_dir(root, tmp_path):
    marker = tmp_path / "imported.txt"
    plant_modules(root, marker)
    make_run(root, "killed", steps=[100], total=1000)  # its checkpoints: b"ckpt", corrupt
    app = create_app(root, token=TOKEN, max_runs=3)
    with TestClient(app) as c:
        values = {
            "env": "plain.evilmod:Env",
            "total_steps": "64",
            "hidden_size": "4",
            "n_envs": "1",
            "n_steps": "16",
        }
        r = c.post("/api/launch", json={"algo": "ppo", "name": "evil", "values": values}, headers=H)
        assert r.status_code == 201, r.text
        assert c.post("/api/run/killed/resume", headers=H).status_code == 201
        r = c.post("/api/run/done/render", json={"seed": 0, "format": "gif"}, headers=H)
        assert r.status_code == 201, r.text
        wait_all_ended(app)
    assert not marker.exists(), marker.read_text()
    logs = root / LAUNCH_DIR
    evil = (logs / "evil.log").read_text()
    # the env module is looked for where snrl looks (installed packages, PYTHONPATH), and
    # RUNS_DIR/plain is not there: the CLI's one-line error, no traceback
    assert "error: " in evil and "plain" in evil and "Traceback" not in evil, evil
    resume = (logs / "killed.log").read_text()
    assert "error: " in resume and "Traceback" not in resume, resume  # the corrupt checkpoint
    render = (logs / "done.render.log").read_text()
    assert "error: " in render and "Traceback" not in render, render
    assert json.loads((logs / "evil.json").read_text())["returncode"] == 2


def test_children_start_outside_runs_dir(root, monkeypatch):
    started = []

    class Recorder:
        def __init__(self, argv, **kwargs):
            started.append((argv, kwargs))
            self.pid, self.returncode = 4242, 0

        def poll(self):
            return 0

    monkeypatch.setattr("snrl.dashboard.launcher.subprocess.Popen", Recorder)
    with client_of(root, max_runs=3) as c:
        body = {"algo": "ppo", "name": "n1", "values": {}}
        assert c.post("/api/launch", json=body, headers=H).status_code == 201
        assert c.post("/api/run/done/render", json={}, headers=H).status_code == 201
    assert len(started) == 2
    for argv, kwargs in started:
        cwd = os.path.realpath(kwargs["cwd"])
        assert not (cwd + os.sep).startswith(str(root.resolve()) + os.sep), cwd
        assert "shell" not in kwargs and kwargs["env"]["PYTHONSAFEPATH"] == "1"
        assert argv[1] == "-c" and argv[2].startswith("import sys; sys.path[:] = [")


def test_child_pythonpath_keeps_the_users_entries_outside_runs_dir(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    (root / "sub").mkdir(parents=True)
    lib = tmp_path / "lib"
    lib.mkdir()
    (root / "link").symlink_to(lib)  # a link out of RUNS_DIR is the user's own folder
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    path = os.pathsep.join(
        [
            "",
            str(lib),
            "rel",
            str(root),
            str(root / "sub"),
            "..",
            str(tmp_path / "runs" / ".." / "runs" / "sub"),
        ]
    )
    env = child_env(root, {"X": "1"}, base={"PYTHONPATH": path, "HOME": "/h"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(lib), str(here / "rel"), str(tmp_path)]
    assert (env["X"], env["HOME"], env["PYTHONUNBUFFERED"]) == ("1", "/h", "1")
    assert env["PYTHONSAFEPATH"] == "1"  # nor on the path of a Python a child starts
    # only entries inside RUNS_DIR: no PYTHONPATH at all (an empty one would mean the cwd)
    env = child_env(root, None, base={"PYTHONPATH": f"{root}{os.pathsep}"})
    assert "PYTHONPATH" not in env


# ---------------------------------------------------------------- files, token, page
def test_run_files_are_served_inert_and_sandboxed(root):
    d = root / "done"
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    (d / "x.svg").write_text(svg)
    (d / "x.html").write_text("<script>alert(1)</script>")
    (d / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (d / "x.mp4").write_bytes(b"\0\0\0\x18ftypmp42")
    (d / "X.GIF").write_bytes(b"GIF89a")
    with client_of(root) as c:
        for name in ("x.svg", "x.html", "metrics.csv", "config.json"):
            r = c.get(f"/files/done/{name}", headers=H)
            assert r.status_code == 200, name
            assert r.headers["content-type"] == "application/octet-stream", name
            assert r.headers["content-disposition"].startswith("attachment"), name
            assert r.headers["content-security-policy"] == "sandbox", name
            assert r.headers["x-content-type-options"] == "nosniff", name
        assert c.get("/files/done/x.svg", headers=H).text == svg  # unchanged bytes
        for name, media in (("x.png", "image/png"), ("x.mp4", "video/mp4"), ("X.GIF", "image/gif")):
            r = c.get(f"/files/done/{name}", headers=H)
            assert r.headers["content-type"] == media, name
            assert "content-disposition" not in r.headers, name
            assert r.headers["content-security-policy"] == "sandbox", name
            assert r.headers["x-content-type-options"] == "nosniff", name


def test_first_load_trades_the_token_for_a_read_only_cookie(root):
    with client_of(root) as c:
        r = c.get("/?token=" + TOKEN, follow_redirects=False)
        assert r.status_code == 200 and f'content="{TOKEN}"' in r.text  # the page sends it
        assert r.headers["content-security-policy"] == PAGE_CSP
        assert r.headers["x-content-type-options"] == "nosniff"
        cookie = r.headers["set-cookie"]
        name, value = cookie.split(";")[0].split("=", 1)
        flags = {f.strip().lower() for f in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= flags
        assert value and TOKEN not in cookie  # the cookie is not the token
        assert "?token=" not in r.text  # no URL of the page carries the token
        # the cookie alone reads everything, and no answer to it holds the token: whoever
        # gets the cookie (another server on this host name does) cannot learn the token
        for path in (
            "/",
            "/api/runs",
            "/api/run/done",
            "/files/done/metrics.csv",
            "/static/app.js",
            "/api/schema",
        ):
            r = c.get(path, follow_redirects=False)
            assert r.status_code == 200, path
            assert TOKEN not in r.text, path
        assert 'name="snrl-token" content=""' in c.get("/").text
        # the cookie reads, it never writes: a POST needs the token in the header
        r = c.post("/api/launch", json={"algo": "ppo", "name": "x1", "values": {}})
        assert r.status_code == 403
        assert c.post("/api/run/done/render", json={}).status_code == 403
    with client_of(root) as other:  # a cookie of another server (or an earlier one)
        other.cookies.set(name, value)
        assert other.get("/api/runs").status_code == 403
        other.cookies.set(name, "x")
        assert other.get("/api/runs").status_code == 403
    assert not (root / "x1").exists()
    # the page's policy: scripts from the server only, no inline script, no eval
    script = next(p for p in PAGE_CSP.split(";") if p.strip().startswith("script-src"))
    assert script.split() == ["script-src", "'self'"]
    assert "default-src 'none'" in PAGE_CSP and "frame-ancestors 'none'" in PAGE_CSP


def test_run_name_with_a_final_newline_is_refused(root):
    assert NAME_RE.match("ok-name") and not NAME_RE.match("nl\n")
    with client_of(root) as c:
        r = c.post("/api/launch", json={"algo": "ppo", "name": "nl\n", "values": {}}, headers=H)
        assert r.status_code == 422 and "name" in r.json()["errors"]


# ---------------------------------------------------------------- crafted run folders
def test_fifo_device_and_links_in_run_folders_never_block_or_break_the_list(root, tmp_path):
    fifo = make_run(root, "fifo", steps=[100], total=1000)
    (fifo / "metrics.csv").unlink()
    os.mkfifo(fifo / "metrics.csv")
    zero = make_run(root, "zero", steps=[100], total=1000)
    (zero / "metrics.csv").unlink()
    (zero / "metrics.csv").symlink_to("/dev/zero")
    conf = make_run(root, "fifoconf", steps=[100], total=1000)
    (conf / "config.json").unlink()
    os.mkfifo(conf / "config.json")
    secret = tmp_path / "secret.csv"
    secret.write_text("env_step,secret\n1,2\n")
    out = make_run(root, "outside", steps=[100], total=1000)
    (out / "metrics.csv").unlink()
    (out / "metrics.csv").symlink_to(secret)
    launch = root / LAUNCH_DIR
    launch.mkdir()
    os.mkfifo(launch / "fifo.log")
    write_json_atomic(launch / "fifo.json", {"log": "fifo.log", "returncode": 1})
    os.mkfifo(launch / "pipe.json")
    with client_of(root) as c:
        rows = in_time(lambda: c.get("/api/runs", headers=H))
        assert rows.status_code == 200
        runs = {r["id"]: r for r in rows.json()["runs"]}
        assert {"done", "fifo", "zero", "fifoconf", "outside", "pipe"} <= set(runs)
        assert "cannot be read" in runs["pipe"]["problem"]
        assert runs["done"]["steps"] == 300 and runs["done"]["problem"] is None
        for rid in ("fifo", "zero", "outside"):
            assert runs[rid]["rows"] == 0 and "metrics.csv not read" in runs[rid]["problem"]
        assert "config.json not read" in runs["fifoconf"]["problem"]
        assert runs["fifoconf"]["total_steps"] is None
        for path in (
            "/api/run/fifo",
            "/api/run/zero",
            "/api/run/outside",
            "/api/log/fifo",
            "/api/log/pipe",
        ):
            r = in_time(lambda path=path: c.get(path, headers=H))
            assert r.status_code in (200, 404), path
            assert "secret" not in r.text
        assert in_time(lambda: c.get("/files/fifo/metrics.csv", headers=H)).status_code == 404
        assert c.get("/files/zero/metrics.csv", headers=H).status_code == 403

        def first_events():
            got = []
            with c.stream("GET", "/api/run/fifo/events", headers=H) as r:
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        got.append(line[7:])
                        if got[-1] == "status":
                            return got
            return got

        assert in_time(first_events) == ["status"]  # no header, no rows, no hang


def sparse_metrics(path: Path, size: int, tail_rows: list[str]) -> None:
    """A metrics.csv of ``size`` bytes that takes no disk: a header, a hole, rows at the
    end (what a crafted or corrupted file can be)."""
    path.unlink()
    with open(path, "wb") as f:
        f.write(b"env_step,episode_return_mean,eval_return_mean\n")
        tail = ("\n" + "".join(r + "\n" for r in tail_rows)).encode()
        f.truncate(size - len(tail))
        f.seek(size - len(tail))
        f.write(tail)


def test_a_sparse_gigabyte_metrics_csv_costs_bounded_memory(root):
    d = make_run(root, "huge", steps=[100], total=1000)
    sparse_metrics(d / "metrics.csv", 1 << 30, ["700,5.0,1.0", "800,6.0,nan"])
    index = RunIndex(root.resolve())
    tracemalloc.start()
    try:
        rows = {r["id"]: r for r in index.list_runs()}
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MAX_METRICS_READ  # not the file's size (a GB)
    huge = rows["huge"]
    assert (huge["steps"], huge["last_return"], huge["best_eval"]) == (800, 6.0, 1.0)
    assert huge["rows"] == 2 and "last part" in huge["problem"]
    with client_of(root) as c:  # the run view's stream: the newest rows
        with c.stream("GET", "/api/run/huge/events", headers=H) as r:
            data = None
            for line in r.iter_lines():
                if line == "event: rows":
                    data = "next"
                elif data == "next" and line.startswith("data: "):
                    data = json.loads(line[6:])
                    break
        assert data == [[700, 5.0, 1.0], [800, 6.0, None]]


def test_nested_json_and_bad_launch_records_show_as_runs_with_a_problem(root):
    nested = make_run(root, "nested", steps=[100], total=1000)
    (nested / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    deep = make_run(root, "deep", steps=[100], total=1000)
    (deep / "config.json").write_text('{"a": ' * 100 + "1" + "}" * 100)
    listy = make_run(root, "listy", steps=[100], total=1000)
    (listy / "config.json").write_text("[1, 2]")
    launch = root / LAUNCH_DIR
    launch.mkdir()
    records = {
        "cfglist": {"algo": "ppo", "config": [1], "log": "cfglist.log"},
        "cfgdeep": {"algo": ["x"], "config": json.loads('{"a": ' * 80 + "1" + "}" * 80)},
        "abslog": {"log": "/etc/passwd", "returncode": 1},
        "uplog": {"log": "../done/config.json", "returncode": 1},
        "numlog": {"log": 5, "config": {"total_steps": "x"}},
    }
    for name, rec in records.items():
        (launch / f"{name}.json").write_text(json.dumps(rec))
    (launch / "notjson.json").write_text("{")
    (launch / "array.json").write_text("[1]")
    (launch / "nl\n.json").write_text("{}")
    with client_of(root) as c:
        r = c.get("/api/runs", headers=H)
        assert r.status_code == 200, r.text
        runs = {x["id"]: x for x in r.json()["runs"]}
        assert "nested deeper than 64" in runs["nested"]["problem"]
        assert "nested deeper than 64" in runs["deep"]["problem"]
        assert "not a JSON object" in runs["listy"]["problem"]
        assert runs["done"]["status"] == "finished"
        assert set(records) <= set(runs)
        assert runs["cfglist"]["algo"] == "ppo"
        assert runs["abslog"]["reason"] is None or "root:" not in runs["abslog"]["reason"]
        for rid in (*records, "nested", "deep", "listy"):
            want = 404 if rid == "cfgdeep" else 200  # no folder, and no record it can read
            assert c.get(f"/api/run/{rid}", headers=H).status_code == want, rid
        for rid in ("cfgdeep", "notjson", "array"):  # unreadable records: failed, and why
            assert runs[rid]["status"] == "failed" and "cannot be read" in runs[rid]["problem"]
        assert "nl\n" not in runs


def test_a_crafted_comparison_folder_still_shows(root, tmp_path):
    d = root / "cmp"
    d.mkdir()
    write_manifest(d, {"request": {"env": "CartPole-v1"}})
    (d / "status").mkdir()
    (d / "status" / "a.json").write_text(json.dumps({"name": [1], "group": {"x": 1}}))
    (d / "status" / "b.json").write_text("[" * 10_000 + "]" * 10_000)
    os.mkfifo(d / "status" / "c.json")
    (d / "runs").mkdir()
    make_run(d / "runs", "good", steps=[100, 200], total=200)
    bad = make_run(d / "runs", "bad", steps=[100], total=200)
    (bad / "metrics.csv").unlink()
    os.mkfifo(bad / "metrics.csv")
    (bad / "config.json").write_text(json.dumps({"backbone": ["lif"]}))
    os.mkfifo(d / "summary.csv")
    (d / "report.md").symlink_to("/dev/zero")
    with client_of(root) as c:
        r = in_time(lambda: c.get("/api/comparison/cmp", headers=H))
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["summary"] is None and got["report"] is None
        assert {x["name"] for x in got["runs"]} >= {"a", "b", "c", "good", "bad"}
        assert [k for k in got["curves"]] == ["lif"] and got["curves"]["lif"]["n_seeds"] == 1


def test_nested_json_in_a_request_is_a_4xx(root):
    deep = "[" * 50_000 + "]" * 50_000
    with client_of(root) as c:
        for path in ("/api/validate", "/api/launch", "/api/run/done/render"):
            r = c.post(path, content=deep.encode(), headers=H)
            assert r.status_code == 400 and "nested deeper" in r.json()["error"], path
            body = '{"values": ' + "{" * 100 + "}" * 100 + "}"
            r = c.post(path, content=body.encode(), headers=H)
            assert r.status_code == 400, path
        for field in ("curriculum", "env_kwargs"):
            for value in ("[" * 5000 + "]" * 5000, '{"a": ' * 2000 + "1" + "}" * 2000):
                body = {"algo": "ppo", "name": "n1", "values": {field: value}}
                r = c.post("/api/launch", json=body, headers=H)
                assert r.status_code == 422, (field, r.text[:200])
                assert "nested deeper than 64" in r.json()["errors"][field]
        assert c.get("/api/runs", headers=H).status_code == 200
    assert not (root / "n1").exists()


def test_loads_bounded_measures_depth_without_recursion():
    assert loads_bounded("[[1]]", max_depth=2) == [[1]]
    for text in ("[[[1]]]", '{"a": {"b": [1]}}'):
        with pytest.raises(ValueError, match="nested deeper than 2"):
            loads_bounded(text, max_depth=2)
    with pytest.raises(ValueError, match="nested deeper"):
        loads_bounded("[" * 100_000 + "]" * 100_000)
    assert loads_bounded('"[[[[[["', max_depth=0) == "[[[[[["  # inside a string: no depth


def test_the_dashboard_imports_no_cli_and_has_no_long_function():
    # snrl.cli and snrl.dashboard share a floor and neither imports the other (DESIGN.md):
    # the form's error messages come from snrl.errors.error_message, as the CLI's do
    import ast

    import snrl.dashboard

    for path in Path(snrl.dashboard.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("snrl.cli"), path
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("snrl.cli") for a in node.names), path
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 120, f"{path.name}: {node.name} has {lines} lines"


def test_the_dashboard_itself_imports_nothing_from_runs_dir(root, monkeypatch):
    # `python -m snrl.cli dashboard .` inside RUNS_DIR puts it first on sys.path ("" and the
    # directory); serve() takes those entries out while it serves, and puts them back
    import importlib.util
    import sys

    from snrl.dashboard import runs_dir_off_sys_path

    (root / "snrl_planted_mod").mkdir()
    (root / "snrl_planted_mod" / "__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.chdir(root / "done")
    monkeypatch.setattr(sys, "path", ["", str(root), str(root / "done"), *sys.path])
    before = list(sys.path)
    assert importlib.util.find_spec("snrl_planted_mod") is not None
    with runs_dir_off_sys_path(root) as removed:
        assert removed == ["", str(root), str(root / "done")]
        assert importlib.util.find_spec("snrl_planted_mod") is None
        assert sys.path == before[3:]
    assert sys.path == before

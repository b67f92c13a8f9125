"""A seeded fuzz of the dashboard's HTTP API: generated methods, paths, tokens (header,
query, cookie), content types and bodies (malformed, nested, wrong types, huge), against a
RUNS_DIR with ordinary and crafted runs. Every answer is a 2xx, 3xx or 4xx, never a 500;
no process is started; the server keeps serving (docs/reliability.md, "The dashboard")."""

from __future__ import annotations

import json
import os
import random
import string
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("plotly")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from snrl.dashboard import create_app  # noqa: E402
from tests.test_dashboard import TOKEN, make_run  # noqa: E402

N_CASES = 250

RUN_IDS = [
    "done",
    "killed",
    "group/nested",
    "cmp",
    "fifo",
    "nope",
    "..",
    "../done",
    "%2e%2e",
    "done/..",
    ".snrl-dashboard",
    "a" * 300,
    "done%00",
    "d%C3%B6ne",
    "%ff%fe",
    "",
    "/etc/passwd",
    "done\\x",
    "group",
    "group/",
    "x/y/z",
    "ürün",
    "done/metrics.csv",
]
FILES = [
    "done/metrics.csv",
    "done/config.json",
    "done/x.svg",
    "fifo/metrics.csv",
    "done/checkpoints/last.pt",
    "done/.snrl-run.json",
    "../secret",
    "done/nope.png",
]
TEMPLATES = [
    "/",
    "/static/app.js",
    "/static/style.css",
    "/static/plotly.min.js",
    "/static/{id}",
    "/api/runs",
    "/api/schema",
    "/api/validate",
    "/api/launch",
    "/api/run/{id}",
    "/api/run/{id}/events",
    "/api/run/{id}/stop",
    "/api/run/{id}/resume",
    "/api/run/{id}/render",
    "/api/log/{id}",
    "/api/comparison/{id}",
    "/files/{file}",
    "/files/{id}",
    "/nowhere",
    "/api/",
    "/api/run/",
    "//api/runs",
    "/api/runs/../schema",
]
METHODS = ["GET"] * 5 + ["POST"] * 5 + ["HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"]
FIELDS = [
    "lr",
    "gamma",
    "hidden_size",
    "n_envs",
    "env",
    "env_kwargs",
    "curriculum",
    "total_steps",
    "backbone",
    "force_dale_law",
    "seed",
    "nope",
    "",
    "__class__",
]


def scalar(rng: random.Random):
    return rng.choice(
        [
            None,
            True,
            False,
            0,
            -1,
            2**70,
            1e308,
            -0.0,
            3.5,
            "",
            "ppo",
            "dqn",
            "none",
            "CartPole-v1",
            "x" * rng.randint(0, 2000),
            "\x00",
            "ü\u202e",
            "[1, 2]",
            '{"a": 1}',
            "[" * 300,
            "nan",
            "inf",
            "1e999",
            "mod:Cls",
            "http://127.0.0.1:abc",
            "".join(rng.choice(string.printable) for _ in range(rng.randint(1, 40))),
        ]
    )


def nested(rng: random.Random, depth: int):
    if depth <= 0 or rng.random() < 0.3:
        return scalar(rng)
    if rng.random() < 0.5:
        return [nested(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(FIELDS + ["algo", "name", "values", "seed", "format"]): nested(rng, depth - 1)
        for _ in range(rng.randint(0, 4))
    }


def body(rng: random.Random) -> bytes | None:
    kind = rng.randrange(10)
    if kind == 0:
        return None
    if kind == 1:  # malformed bytes
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
    if kind == 2:  # nested past any bound
        n = rng.choice([65, 1000, 100_000])
        return ("[" * n + "]" * n).encode()
    if kind == 3:  # over the size limit
        return b'{"a": "' + b"x" * (300 * 1024) + b'"}'
    if kind in (4, 5):  # a form, with values of every type
        values = {rng.choice(FIELDS): scalar(rng) for _ in range(rng.randint(0, 5))}
        if rng.random() < 0.2:
            values = nested(rng, 4)
        form = {
            "algo": rng.choice(["ppo", "dqn", "x", None, 1, ["ppo"]]),
            "name": rng.choice(
                [
                    "fz" + str(rng.randrange(1000)),
                    "",
                    "../x",
                    "a/b",
                    "nl\n",
                    5,
                    None,
                    "done",
                    "x" * 200,
                ]
            ),
            "values": values,
            "env_token": scalar(rng),
        }
        return json.dumps(form).encode()
    if kind == 6:  # render options
        return json.dumps(
            {"seed": scalar(rng), "format": rng.choice(["mp4", "gif", "svg", 1])}
        ).encode()
    return json.dumps(nested(rng, rng.randint(0, 6))).encode()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "runs"
    r.mkdir()
    make_run(r, "done", steps=[100, 200], total=200)
    make_run(r, "killed", steps=[100], total=1000)
    make_run(r / "group", "nested", steps=[100], total=100)
    (r / "done" / "x.svg").write_text("<svg><script>alert(1)</script></svg>")
    fifo = make_run(r, "fifo", steps=[100], total=1000)
    (fifo / "metrics.csv").unlink()
    os.mkfifo(fifo / "metrics.csv")
    (tmp_path / "secret").write_text("secret")
    return r


def test_fuzz_the_api_never_answers_500(root, monkeypatch):
    def no_process(*a, **k):  # nothing the fuzz sends may start a process
        raise AssertionError(f"a process was started: {a!r}")

    monkeypatch.setattr("snrl.dashboard.launcher.subprocess.Popen", no_process)
    app = create_app(root, token=TOKEN, max_runs=0)
    app.state.dashboard.stopping = True  # event streams end after their first message
    before = sorted(os.listdir(root))
    rng = random.Random(20261204)
    seen: Counter = Counter()
    failures = []
    with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as c:
        for case in range(N_CASES):
            template = rng.choice(TEMPLATES)
            path = template.format(id=rng.choice(RUN_IDS), file=rng.choice(FILES))
            headers: dict[str, str | bytes] = {}
            auth = rng.randrange(6)
            if auth in (0, 1, 2):
                headers["X-SNRL-Token"] = TOKEN
            elif auth == 3:
                headers["X-SNRL-Token"] = rng.choice(
                    ["", "wrong", TOKEN + "x", TOKEN.upper(), "ü\xff".encode("latin-1")]
                )
            elif auth == 4:
                path += (
                    ("&" if "?" in path else "?")
                    + "token="
                    + rng.choice([TOKEN, "wrong", "", "%00", "%ff"])
                )
            if rng.random() < 0.3:
                headers["Content-Type"] = rng.choice(
                    [
                        "application/json",
                        "text/plain",
                        "multipart/form-data",
                        "x/y; charset=ü".encode("latin-1"),
                    ]
                )
            c.cookies.clear()
            if rng.random() < 0.2:
                c.cookies.set(
                    rng.choice(["snrl_dashboard", "snrl_dashboard_80"]),
                    rng.choice(["x", TOKEN, ""]),
                )
            posted = template.endswith(("validate", "launch", "stop", "resume", "render"))
            method = rng.choice(METHODS) if rng.random() < 0.2 else "POST" if posted else "GET"
            data = body(rng) if method in ("POST", "PUT", "PATCH") else None
            r = c.request(method, path, content=data, headers=headers)
            seen[r.status_code] += 1
            if r.status_code >= 500:
                failures.append((case, method, path, headers, (data or b"")[:200], r.text[:300]))
        assert not failures, failures[:5]
        # the server keeps serving, and the fuzz reached past the token check
        assert c.get("/api/runs", headers={"X-SNRL-Token": TOKEN}).status_code == 200
    assert sorted(os.listdir(root)) in (before, sorted([*before, ".snrl-dashboard"]))
    assert sum(n for s, n in seen.items() if 200 <= s < 300) >= 30, seen
    for status in (400, 401, 403, 404, 405, 409, 422):
        assert seen[status] > 0, (status, seen)

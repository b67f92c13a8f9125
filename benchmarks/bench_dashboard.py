"""Dashboard benchmark (issue 16): what serving and watching runs costs.

Three measurements:

* ``list``: server time to produce the run list (``GET /api/runs``, through Starlette's
  TestClient: the handler, the summaries, the JSON) for ``--runs`` synthetic run directories
  (manifest, config.json, a metrics.csv of ``--rows`` rows written the way snrl writes it,
  checkpoints/best.pt and last.pt), against ``os.scandir`` listing the directories alone.
  Cold: a new server (every metrics.csv read once); warm: the next request (summaries cached
  by mtime and size, nothing changed). Target: under 1 s.
* ``latency``: seconds from a metrics row being appended to a run's metrics.csv to the run
  view in headless Chromium showing it (the page records ``Date.now()`` when its row count
  changes; the row's write time is taken just before the append). Target: under 2 s.
* ``train``: env steps/s of a ``snrl train`` process (Dale LIF, 64 hidden, CartPole-v1, from
  its metrics.csv: last env_step / last wall_time, so start-up is excluded) with and without
  the dashboard watching it (the server in this process and a Chromium page on the run's live
  view); the two conditions alternate ``--pairs`` times. Target: a drop under 5 %.

Usage::

    python benchmarks/bench_dashboard.py                  # all three (a few minutes)
    python benchmarks/bench_dashboard.py --quick          # a smoke test
    python benchmarks/bench_dashboard.py --screenshots shots      # the docs' screenshots, then
    python benchmarks/docs_png.py shots/dashboard_run.png docs/img/dashboard_run.png ...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from snrl.agents import PPOConfig  # noqa: E402
from snrl.config import config_to_dict  # noqa: E402
from snrl.training.rundir import LAYOUT, MANIFEST  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
COLUMNS = ["env_step", "wall_time", "episode_return_mean", "eval_return_mean", "episodes", "lr",
           "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
           "explained_variance", "spike_rate_lif0"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("no chromium executable on PATH (apt-get install chromium)")


def synthetic_runs(root: Path, n: int, rows: int) -> None:
    """``n`` run directories as `snrl train` leaves them (files written directly: fast)."""
    manifest = json.dumps({"format": "snrl-run", "version": 1, "entries": list(LAYOUT)})
    for i in range(n):
        d = root / f"run-{i:04d}"
        (d / "checkpoints").mkdir(parents=True)
        (d / MANIFEST).write_text(manifest)
        cfg = PPOConfig(backbone=("lif", "mlp", "gru")[i % 3], seed=i % 5, total_steps=rows * 256)
        (d / "config.json").write_text(json.dumps({"algo": "ppo", **config_to_dict(cfg)}))
        lines = [",".join(COLUMNS)]
        for r in range(rows):
            ev = repr(100.0 + r) if r % 20 == 19 else "nan"
            lines.append(f"{256 * (r + 1)},{0.5 * r!r},{20.0 + r * 0.37!r},{ev},8,0.001,"
                         f"-0.0123456789,7.123456789,0.69123456,0.00212345,0.0123,0.31234,"
                         f"0.0912345")
        (d / "metrics.csv").write_text("\n".join(lines) + "\n")
        for name in ("best.pt", "last.pt"):
            (d / "checkpoints" / name).write_bytes(b"\0" * 4096)


def bench_list(n: int, rows: int, repeats: int) -> dict:
    from starlette.testclient import TestClient

    from snrl.dashboard import create_app

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        synthetic_runs(root, n, rows)
        scans, colds, warms = [], [], []
        for _ in range(repeats):
            t = time.perf_counter()
            names = [e.name for e in os.scandir(root) if e.is_dir()]
            scans.append(time.perf_counter() - t)
            assert len(names) == n
            client = TestClient(create_app(root, token=TOKEN))
            t = time.perf_counter()
            r = client.get("/api/runs", headers={"X-SNRL-Token": TOKEN})
            colds.append(time.perf_counter() - t)
            assert r.status_code == 200 and len(r.json()["runs"]) == n
            t = time.perf_counter()
            r = client.get("/api/runs", headers={"X-SNRL-Token": TOKEN})
            warms.append(time.perf_counter() - t)
            assert r.json()["runs"][0]["rows"] == rows
    out = {"runs": n, "rows": rows, "scandir_s": statistics.median(scans),
           "cold_s": statistics.median(colds), "warm_s": statistics.median(warms),
           "cold_max_s": max(colds), "warm_max_s": max(warms)}
    print(f"list {n} runs x {rows} rows: os.scandir {out['scandir_s'] * 1e3:.1f} ms; "
          f"GET /api/runs cold {out['cold_s'] * 1e3:.0f} ms (max {out['cold_max_s'] * 1e3:.0f}, "
          f"{out['cold_s'] / out['scandir_s']:.0f}x scandir), warm {out['warm_s'] * 1e3:.0f} ms "
          f"(max {out['warm_max_s'] * 1e3:.0f}, {out['warm_s'] / out['scandir_s']:.0f}x scandir)")
    return out


class Server:
    """The dashboard on a free loopback port, in a thread of this process."""

    def __init__(self, root: Path):
        import uvicorn

        from snrl.dashboard import create_app

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.app = create_app(root, token=TOKEN, max_runs=4)
        self.srv = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                 log_level="warning", timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.srv.run, daemon=True)
        self.thread.start()
        while not self.srv.started:
            time.sleep(0.05)

    def url(self, hash_: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/?token={TOKEN}{hash_}"

    def close(self) -> None:
        self.app.state.dashboard.stopping = True
        self.srv.should_exit = True
        self.thread.join(10)


WATCH_JS = """() => {
  window.__seen = {};
  const el = document.getElementById('rowcount');
  new MutationObserver(() => { window.__seen[el.dataset.rows] = Date.now(); })
    .observe(el, { attributes: true, childList: true, characterData: true, subtree: true });
}"""


def bench_latency(repeats: int) -> dict:
    import random

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        synthetic_runs(root, 1, 5)
        path = root / "run-0000" / "metrics.csv"
        server = Server(root)
        lat = []
        try:
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
                page = b.new_page()
                page.goto(server.url("#/run/run-0000"))
                page.wait_for_function("document.getElementById('rowcount').dataset.rows === '5'")
                page.evaluate(WATCH_JS)
                rng = random.Random(0)
                for k in range(repeats):
                    time.sleep(rng.uniform(0.3, 1.3))  # no phase lock with the 0.25 s poll
                    n = 6 + k
                    written = time.time()
                    with open(path, "a") as f:
                        f.write(f"{256 * n},{n * 0.5},{30.0 + n},nan,8,0.001,-0.01,7.1,0.69,"
                                "0.002,0.01,0.3,0.09\n")
                    page.wait_for_function(f"window.__seen['{n}'] !== undefined", timeout=10_000)
                    seen = page.evaluate(f"window.__seen['{n}']") / 1000
                    lat.append(seen - written)
                b.close()
        finally:
            server.close()
    out = {"repeats": repeats, "median_s": statistics.median(lat), "max_s": max(lat),
           "min_s": min(lat)}
    print(f"latency row written -> shown in the page ({repeats} rows): median "
          f"{out['median_s']:.2f} s, min {out['min_s']:.2f} s, max {out['max_s']:.2f} s")
    return out


def _cpu_s(pids: set[int]) -> dict[int, float]:
    """CPU seconds (user + system) each of ``pids`` used so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return out


def _used(before: dict[int, float], after: dict[int, float]) -> tuple[float, float]:
    """(this process, the others) CPU seconds between two looks, over the processes alive at
    both (a page closed meanwhile takes its renderer's time with it)."""
    me = os.getpid()
    own = after.get(me, 0.0) - before.get(me, 0.0)
    others = sum(after[p] - before[p] for p in after if p in before and p != me)
    return own, others


def _dashboard_pids(exclude: int) -> set[int]:
    """This process and its descendants (the Playwright driver, Chromium), without the
    training process ``exclude`` and its own children."""
    parent = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                parent[int(p.name)] = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    keep = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in keep and pid not in keep and pid != exclude:
                keep.add(pid)
                changed = True
    return keep


def _train(out: Path, steps: int, watch) -> tuple[float, float, tuple[float, float]]:
    """(env steps/s, CPU s of the training process, CPU s of the dashboard side: this
    process (the server) and its other descendants (Playwright's driver, Chromium))."""
    argv = [sys.executable, "-m", "snrl.cli", "train", "--env", "CartPole-v1", "--backbone",
            "lif", "--hidden", "64", "--steps", str(steps), "--set", "eval_interval=0",
            "--set", "eval_episodes=2", "--set", "threads=1", "--out", str(out), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the page is open on the run's view before the run starts: the steady cost of watching
    # (event stream, plots redrawn per row, status polls), not the page's own load
    page = watch(out.name) if watch is not None else None
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        side = _dashboard_pids(proc.pid)
        side_before = _cpu_s(side)
        _, status, usage = os.wait4(proc.pid, 0)
        side_cpu = _used(side_before, _cpu_s(side))
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"training failed: {err.read().decode()[-500:]}")
    if page is not None:
        page.close()
    lines = (out / "metrics.csv").read_text().strip().splitlines()
    header = lines[0].split(",")
    last = lines[-1].split(",")
    step = float(last[header.index("env_step")])
    wall = float(last[header.index("wall_time")])
    return step / wall, usage.ru_utime + usage.ru_stime, side_cpu


def bench_train(pairs: int, steps: int) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = Server(root)
        base, watched, overhead = [], [], []
        try:
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])

                def watch(run_id):
                    page = b.new_page()
                    page.goto(server.url(f"#/run/{run_id}"))
                    page.wait_for_selector("#plot-return")
                    return page

                for i in range(pairs):
                    order = (False, True) if i % 2 == 0 else (True, False)
                    for watching in order:
                        out = root / f"{'w' if watching else 'b'}{i}"
                        sps, cpu, side = _train(out, steps, watch if watching else None)
                        (watched if watching else base).append(sps)
                        if watching:
                            overhead.append(sum(side) / cpu)
                        print(f"  pair {i}: {'watched' if watching else 'alone  '} "
                              f"{sps:.0f} env steps/s; training {cpu:.1f} CPU s; server "
                              f"{side[0]:.2f} CPU s, browser {side[1]:.2f} CPU s; load "
                              f"{os.getloadavg()[0]:.1f}", flush=True)
                b.close()
        finally:
            server.close()
    mb, mw = statistics.median(base), statistics.median(watched)
    out = {"pairs": pairs, "steps": steps, "alone": base, "watched": watched,
           "median_alone": mb, "median_watched": mw, "drop": 1 - mw / mb,
           "dashboard_cpu_per_training_cpu": overhead}
    print(f"train {steps} steps x {pairs} pairs: alone {mb:.0f} env steps/s, watched {mw:.0f} "
          f"({100 * out['drop']:+.1f} % drop); dashboard CPU / training CPU while watching: "
          f"median {100 * statistics.median(overhead):.1f} %")
    return out


def screenshots(out_dir: Path) -> None:
    """The docs' screenshots: run list, a run view, the form with a field error, a comparison
    (real small runs, trained here)."""
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        root.mkdir()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        snrl = [sys.executable, "-m", "snrl.cli"]
        for name, backbone, seed in (("cartpole-lif-s0", "lif", 0), ("cartpole-mlp-s0", "mlp", 0)):
            subprocess.run([*snrl, "train", "--env", "CartPole-v1", "--backbone", backbone,
                            "--hidden", "32", "--steps", "12000", "--seed", str(seed), "--set",
                            "eval_interval=2500", "--set", "eval_episodes=3", "--out",
                            str(root / name), "--quiet"], env=env, check=True)
        # a trial task (NeuroGym): the run view shows trial accuracy beside the return
        subprocess.run([*snrl, "train", "--env", "PerceptualDecisionMaking-v0", "--hidden", "32",
                        "--steps", "12000", "--seed", "0", "--set", "eval_interval=3000",
                        "--set", "eval_episodes=3", "--out", str(root / "pdm-lif-s0"),
                        "--quiet"], env=env, check=True)
        subprocess.run([*snrl, "render", str(root / "cartpole-lif-s0"), "--out",
                        str(root / "cartpole-lif-s0" / "render_seed0.mp4")], env=env, check=True)
        subprocess.run([*snrl, "compare", "--env", "CartPole-v1", "--backbones", "lif,mlp",
                        "--seeds", "2", "--steps", "8000", "--set", "hidden_size=32", "--out",
                        str(root / "compare-cartpole"), "--workers", "2", "--eval-episodes", "3",
                        "--quiet"], env=env, check=True)
        server = Server(root)
        launcher = server.app.state.dashboard.launcher
        try:
            # one run training, one stopped (resumable), one failed: launched as the form does
            import httpx

            def launch(name, **values):
                r = httpx.post(f"http://127.0.0.1:{server.port}/api/launch",
                               headers={"X-SNRL-Token": TOKEN},
                               json={"algo": "ppo", "name": name,
                                     "values": {k: str(v) for k, v in values.items()}})
                assert r.status_code == 201, r.text

            launch("cartpole-gru-s2", backbone="gru", hidden_size=32, seed=2,
                   total_steps=200000, checkpoint_interval=2)
            while not (root / "cartpole-gru-s2" / "checkpoints" / "last.pt").is_file():
                time.sleep(0.2)
            launcher.stop("cartpole-gru-s2")
            launch("my-env-s0", env="my_envs:Maze", seed=0)
            launch("cartpole-alif-s1", backbone="alif", hidden_size=32, seed=1,
                   total_steps=200000, eval_interval=2500, eval_episodes=3)
            while len(launcher.running()) > 1:  # the stopped and the failed ones end
                time.sleep(0.2)
            while not (root / "cartpole-alif-s1" / "metrics.csv").is_file():
                time.sleep(0.2)
            time.sleep(8)
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
                page = b.new_page(viewport={"width": 1280, "height": 520})
                page.goto(server.url("#/"))
                page.wait_for_selector('tr[data-run="cartpole-alif-s1"]')
                page.screenshot(path=str(out_dir / "dashboard_runs.png"))
                # tall: every panel on screen (a plot is drawn only while visible)
                page.set_viewport_size({"width": 1280, "height": 2600})
                page.goto(server.url("#/run/pdm-lif-s0"))
                page.wait_for_selector("#plot-accuracy .gtitle")
                page.wait_for_timeout(5000)  # the small panels are drawn every few seconds
                page.screenshot(path=str(out_dir / "dashboard_run.png"), full_page=True)
                page.set_viewport_size({"width": 1280, "height": 860})
                page.goto(server.url("#/launch"))
                page.fill("#f-name", "my-run")
                page.fill("#f-env", "CartPole-v1")
                page.fill("#f-hidden_size", "0")
                page.click("#launch")
                page.wait_for_selector('[data-field="hidden_size"].invalid')
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(out_dir / "dashboard_launch.png"))
                page.goto(server.url("#/compare/compare-cartpole"))
                page.wait_for_selector("#summary")
                page.wait_for_selector("#report h2")  # report.md, rendered
                page.wait_for_timeout(1000)
                page.screenshot(path=str(out_dir / "dashboard_compare.png"), full_page=True)
                b.close()
        finally:
            for run_id in launcher.running():
                launcher.stop(run_id)
            while launcher.running():
                time.sleep(0.2)
            server.close()
    print(f"screenshots in {out_dir}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--list-repeats", type=int, default=3)
    ap.add_argument("--latency-repeats", type=int, default=15)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--train-steps", type=int, default=8000)
    ap.add_argument("--only", choices=("list", "latency", "train"), default=None)
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    ap.add_argument("--screenshots", type=Path, default=None, metavar="DIR")
    args = ap.parse_args()
    if args.screenshots:
        screenshots(args.screenshots)
        return
    if args.quick:
        args.runs, args.rows, args.list_repeats = 50, 50, 1
        args.latency_repeats, args.pairs, args.train_steps = 3, 1, 1000
    print(f"machine: {os.cpu_count()} CPUs; load before: {os.getloadavg()}")
    results = {}
    if args.only in (None, "list"):
        results["list"] = bench_list(args.runs, args.rows, args.list_repeats)
    if args.only in (None, "latency"):
        results["latency"] = bench_latency(args.latency_repeats)
    if args.only in (None, "train"):
        results["train"] = bench_train(args.pairs, args.train_steps)
    print(f"load after: {os.getloadavg()}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()

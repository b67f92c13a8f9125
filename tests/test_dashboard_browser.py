"""snrl dashboard in a real browser: headless Chromium (the system's, driven by Playwright)
against a server on a free loopback port, used as a user would: the run list, a run launched
from the form that learns live and finishes, a field error, a video that plays, refusals.

Skipped, with the reason, only where no Chromium executable exists (.ci/run installs
Debian's `chromium` where it can)."""

from __future__ import annotations

import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("plotly")
pytest.importorskip("playwright", reason="playwright is not installed (pip install -e '.[dev]')")

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
if CHROMIUM is None:
    pytest.skip(
        "no Chromium executable on PATH (apt-get install chromium): the browser tests of the "
        "dashboard cannot run here",
        allow_module_level=True,
    )

import uvicorn  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from snrl.dashboard import create_app  # noqa: E402
from tests.test_dashboard import make_run  # noqa: E402

TOKEN = "browser-token-0123456789abcdef"


def write_mp4(path: Path) -> None:
    """A 1 s, 10-frame H.264 video (what `snrl render` writes, in small)."""
    import imageio.v2 as iio
    import numpy as np

    with iio.get_writer(path, fps=10, codec="libx264", pixelformat="yuv420p") as w:
        for i in range(10):
            frame = np.zeros((64, 64, 3), np.uint8)
            frame[:, : 6 * i] = 200
            w.append_data(frame)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash") / "runs"
    root.mkdir()
    make_run(root, "done", steps=[100, 200, 300], total=300, evals={300: 42.0})
    make_run(root, "killed", steps=[100, 200], total=1000, seed=3)
    make_run(root, "crashed", steps=[100], total=1000, last_pt=False, backbone="mlp")
    write_mp4(root / "done" / "demo.mp4")
    (root.parent / "secret.txt").write_text("secret")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(root, token=TOKEN, max_runs=2)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                        timeout_graceful_shutdown=1))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    t = time.monotonic()
    while not srv.started:
        assert time.monotonic() - t < 30, "the server did not start"
        time.sleep(0.05)
    yield {"base": f"http://127.0.0.1:{port}", "root": root, "app": app}
    app.state.dashboard.stopping = True
    srv.should_exit = True
    thread.join(10)
    launcher = app.state.dashboard.launcher
    for key in launcher.running():  # a test that failed midway leaves no process behind
        launcher.stop(key, signal.SIGTERM)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # the page's Content-Security-Policy must not block anything the page itself does
    pg.on("console", lambda m: "Content Security Policy" in m.text and errors.append(m.text))
    yield pg
    context.close()
    assert not errors, errors  # no JavaScript error, no CSP refusal, on any page


def url(server, hash_: str = "") -> str:
    return f"{server['base']}/?token={TOKEN}{hash_}"


def clean_url(server, hash_: str = "") -> str:
    """Where the page lives after its first load: the token left the address."""
    return f"{server['base']}/{hash_}"


def test_run_list_shows_the_runs_sorts_and_filters(page, server):
    page.goto(url(server))
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator('tr[data-run="done"] [data-status]')).to_have_text("finished")
    expect(page.locator('tr[data-run="killed"] [data-status]')).to_have_text("killed-resumable")
    expect(page.locator('tr[data-run="crashed"] [data-status]')).to_have_text("failed")
    expect(page.locator('tr[data-run="done"] [data-col="steps"]')).to_have_text("300 / 300")
    expect(page.locator('tr[data-run="done"] [data-col="best_eval"]')).to_have_text("42")
    expect(page.locator('tr[data-run="killed"] [data-col="best_eval"]')).to_have_text("")
    page.click('th[data-key="seed"]')
    page.click('th[data-key="seed"]')  # descending: seed 3 first
    expect(rows.first).to_have_attribute("data-run", "killed")
    page.fill("#filter", "mlp")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run", "crashed")
    page.fill("#filter", "")
    page.select_option("#status-filter", "finished")
    expect(rows).to_have_count(1)


def test_a_bad_field_shows_the_cli_error_next_to_it(page, server):
    page.goto(url(server, "#/launch"))
    page.fill("#f-name", "bad-run")
    page.click("#advanced-summary")  # lr and gamma are advanced settings
    page.fill("#f-lr", "abc")
    page.fill("#f-gamma", "2")
    page.click("#launch")
    expect(page.locator('[data-field="lr"] .error')).to_have_text(
        "error: bad value 'abc' for config key 'lr' in --set (expected float)"
    )
    expect(page.locator('[data-field="gamma"] .error')).to_have_text(
        "error: gamma=2.0 (must be in (0, 1])"
    )
    expect(page.locator('[data-field="lr"]')).to_have_class("field invalid")
    expect(page.locator('[data-field="n_steps"] .error')).to_have_text("")
    assert not (server["root"] / "bad-run").exists()
    # an error in a collapsed "Advanced" opens it: no error is hidden
    page.goto(url(server, "#/launch"))
    page.fill("#f-name", "bad-run")
    page.locator("#f-gamma").evaluate("e => { e.value = '2'; }")
    page.click("#launch")
    expect(page.locator("#advanced")).to_have_attribute("open", "")
    expect(page.locator('[data-field="gamma"] .error')).to_be_visible()


def test_launch_from_the_form_watch_it_learn_and_finish(page, server):
    page.goto(url(server, "#/launch"))
    # every drawing of the learning curve is recorded by the page itself, with the run's
    # status at that moment: the test need not catch a moment mid-run (the run is fast)
    page.evaluate(
        """() => {
          window.__same_page = true;
          window.__draws = [];
          const react = Plotly.react;
          Plotly.react = function (id, data, ...rest) {
            if (id === "plot-return") {
              const badge = document.querySelector("#run-status [data-status]");
              window.__draws.push([data[0].x.length, badge ? badge.textContent : ""]);
            }
            return react.call(this, id, data, ...rest);
          };
        }"""
    )
    page.fill("#f-name", "from-form")
    # long enough (about 10 s here) that rows keep arriving after the page first draws them
    page.click("#advanced-summary")
    for field, value in {"total_steps": "30000", "hidden_size": "16", "n_envs": "4",
                         "eval_interval": "10000", "eval_episodes": "2"}.items():
        page.fill(f"#f-{field}", value)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.locator("#launch").dispatch_event("click")  # launched from down the page
    expect(page).to_have_url(clean_url(server, "#/run/from-form"))
    assert page.evaluate("window.scrollY") == 0  # the run view opens at its top
    # a plot is drawn only while on screen (app.js)
    page.locator("#plot-return").scroll_into_view_if_needed()
    expect(page.locator("#run-status [data-status]")).to_have_text("finished", timeout=120_000)
    assert page.evaluate("window.__same_page") is True  # no reload on the way
    both = (
        "[(document.getElementById('plot-return').data || [{x: []}])[0].x.length,"
        " Number(document.getElementById('rowcount').dataset.rows)]"
    )
    # once in view, the plot holds every row the page counted
    page.locator("#plot-return").scroll_into_view_if_needed()
    page.wait_for_function(f"(([a, b]) => a === b)({both})", timeout=10_000)
    final, rows = page.evaluate(both)
    with open(server["root"] / "from-form" / "metrics.csv") as f:
        assert final == rows == sum(1 for _ in f) - 1  # every row the run wrote, once
    # new rows arrived over the event stream while it trained: the plot was drawn with some
    # rows and then with more, while the run was still running, in the same page
    draws = page.evaluate("window.__draws")
    sizes = [n for n, _ in draws]
    assert sizes == sorted(sizes), draws
    while_running = {n for n, status in draws if status == "running" and n > 0}
    assert len(while_running) >= 2, draws
    evals = page.evaluate("document.getElementById('plot-return').data[1].x.length")
    assert evals >= 2  # the periodic evaluations, as markers
    assert (server["root"] / "from-form" / "checkpoints" / "last.pt").is_file()
    page.goto(url(server))
    expect(page.locator('tr[data-run="from-form"] [data-status]')).to_have_text("finished")


def test_a_video_plays_in_the_page(page, server):
    page.goto(url(server, "#/run/done"))
    video = page.locator('video[data-path="done/demo.mp4"]')
    expect(video).to_have_count(1)
    page.wait_for_function(
        "() => { const v = document.querySelector('video');"
        " return v && isFinite(v.duration) && v.duration > 0; }",
        timeout=20_000,
    )
    duration = page.evaluate("document.querySelector('video').duration")
    assert duration == pytest.approx(1.0, abs=0.15)  # 10 frames at 10 fps


def test_no_token_and_dotdot_paths_are_refused(page, server):
    base = server["base"]
    assert page.goto(f"{base}/").status == 401
    assert "missing token" in page.content()
    assert page.goto(f"{base}/?token=wrong-token-00000000000").status == 403
    page.goto(url(server))
    codes = page.evaluate(
        """async (token) => {
          const out = {};
          for (const p of ["/files/%2e%2e/secret.txt", "/files/done/%2e%2e/%2e%2e/secret.txt",
                           "/files/..%2fsecret.txt", "/files/done/metrics.csv"]) {
            const r = await fetch(p + "?token=" + token);
            out[p] = [r.status, (await r.text()).includes("secret")];
          }
          out.post = (await fetch("/api/launch?token=" + token,
                                  {method: "POST", body: "{}"})).status;
          return out;
        }""",
        TOKEN,
    )
    # the browser resolves %2e%2e segments itself (the URL standard): the request reaches
    # /secret.txt, which is no route (404); ..%2f reaches the server, which refuses it (403)
    assert codes == {
        "/files/%2e%2e/secret.txt": [404, False],
        "/files/done/%2e%2e/%2e%2e/secret.txt": [404, False],
        "/files/..%2fsecret.txt": [403, False],
        "/files/done/metrics.csv": [200, False],
        "post": 403,
    }


def watch_requests(page) -> list[str]:
    """Every URL any frame of the page's browser context requests, from now on."""
    seen: list[str] = []
    page.context.on("request", lambda r: seen.append(r.url))
    return seen


#: A run file someone crafted: a script that takes the token from its own address, or from
#: the dashboard's page (with the browser's cookie), and launches a run.
EVIL = """<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>
(async () => {
  let t = new URLSearchParams(location.search).get("token");
  if (!t) {
    const page = await (await fetch("/")).text();
    t = (page.match(/name="snrl-token" content="([^"]+)"/) || [])[1];
  }
  await fetch("/api/launch", {method: "POST", headers: {"X-SNRL-Token": t,
    "Content-Type": "application/json"}, body: JSON.stringify({algo: "ppo", name: "pwned",
    values: {total_steps: "64"}})});
})();
</script></svg>"""


def test_a_script_in_a_run_file_cannot_launch_anything(page, server):
    from playwright.sync_api import Error as PlaywrightError

    done = server["root"] / "done"
    (done / "evil.svg").write_text(EVIL)
    (done / "evil.html").write_text(f"<html><body>{EVIL}</body></html>")
    page.goto(url(server))  # the browser holds the dashboard's cookie
    expect(page.locator("#runs tbody tr").first).to_be_visible()
    seen = watch_requests(page)
    for name in ("evil.svg", "evil.html"):
        for address in (f"/files/done/{name}?token={TOKEN}", f"/files/done/{name}"):
            try:
                page.goto(server["base"] + address)
            except PlaywrightError:
                pass  # an attachment: a download, no page
            page.wait_for_timeout(500)
    page.goto(clean_url(server, "#/run/done"))  # and shown inside the page, as an image
    page.evaluate(
        "() => { for (const n of ['evil.svg', 'evil.html']) {"
        " const i = document.createElement('img'); i.src = '/files/done/' + n;"
        " document.body.append(i); } }"
    )
    page.wait_for_timeout(1000)
    assert not [u for u in seen if "/api/launch" in u or u.rstrip("/") == server["base"]], seen
    assert not (server["root"] / "pwned").exists()


def test_html_in_a_metrics_column_name_stays_text(page, server):
    d = server["root"] / "htmlcols"
    d.mkdir()
    (d / "config.json").write_text('{"algo": "ppo", "env": "CartPole-v1", "total_steps": 300}')
    link = '<a href="http://evil.invalid/x">policy_loss</a>'
    style = '<span style="background:url(http://evil.invalid/leak)">value_loss</span>'
    bold, entity = "<b>kl</b>", "clip&amp;<br>frac"
    with open(d / "metrics.csv", "w") as f:
        f.write(f"env_step,wall_time,episode_return_mean,{link},{style},{bold},{entity}\n")
        for i in range(1, 4):
            f.write(f"{100 * i},{i},{i},0.1,0.2,0.3,0.4\n")
    seen = watch_requests(page)
    page.goto(url(server, "#/run/htmlcols"))
    titles = page.locator("#plots-more .plot .gtitle")
    for i in range(4):  # one panel per column, titled with its name
        page.locator("#plots-more .plot").nth(i).scroll_into_view_if_needed()
    expect(titles).to_have_count(4)
    assert sorted(titles.all_text_contents()) == sorted([link, style, bold, entity])  # as text
    # plotly made no link, no styled span, nothing fetched from the names
    assert page.locator(".plot a[href*='evil'], .plot [style*='evil']").count() == 0
    assert page.locator(".plot .gtitle a, .plot .gtitle b").count() == 0
    assert not [u for u in seen if "evil.invalid" in u], seen


def test_the_token_leaves_the_address_and_the_tab_keeps_it(page, server):
    page.goto(url(server, "#/launch"))
    expect(page).to_have_url(clean_url(server, "#/launch"))  # out of the address bar
    expect(page.locator("#f-gamma")).to_be_attached()
    page.reload()  # a page loaded with the cookie alone holds no token ...
    page.click("#advanced-summary")
    assert page.locator('meta[name="snrl-token"]').get_attribute("content") == ""
    page.fill("#f-gamma", "2")
    page.locator("#f-gamma").dispatch_event("change")
    # ... and the tab still sends it: the form's check (a POST) is answered
    expect(page.locator('[data-field="gamma"] .error')).to_have_text(
        "error: gamma=2.0 (must be in (0, 1])"
    )
    assert TOKEN not in page.content()


# ---------------------------------------------------------------- issue 39 (and 34 s.2)
BASIC = ["env", "backbone", "force_dale_law", "hidden_size", "total_steps", "seed", "tuned"]


def test_launch_form_basic_fields_first_the_rest_collapsed(page, server):
    page.goto(url(server, "#/launch"))
    basic = page.locator("#fields-basic [data-field]")
    expect(basic).to_have_count(len(BASIC))
    assert [b.get_attribute("data-field") for b in basic.all()] == BASIC
    assert page.locator("#advanced").get_attribute("open") is None  # collapsed
    expect(page.locator("#f-lr")).to_be_hidden()
    expect(page.locator("#f-total_steps")).to_be_visible()
    expect(page.locator("#launch")).to_be_visible()
    for doc in page.locator("#fields-basic .doc").all():  # one line each, and a docs link
        box = doc.bounding_box()
        assert box["height"] < 20, doc.text_content()
        expect(doc.locator("a")).to_be_visible()  # never cut off by a long text
        assert doc.locator("a").get_attribute("href") == (
            "#/doc/agents.md/hyperparameters-snrlppoconfig"
        )
    page.goto(clean_url(server, "#/doc/agents.md/hyperparameters-snrlppoconfig"))
    expect(page.locator("#md-hyperparameters-snrlppoconfig")).to_be_visible()
    expect(page.locator(".markdown table td code", has_text="total_steps").first).to_be_visible()


def test_an_empty_run_says_waiting_for_data(page, server):
    d = server["root"] / "empty-yet"
    d.mkdir()
    (d / "config.json").write_text(
        '{"algo": "ppo", "env": "CartPole-v1", "backbone": "lif", "total_steps": 300}'
    )
    page.goto(url(server, "#/run/empty-yet"))
    expect(page.locator("#plot-return .waiting")).to_have_text("Return: waiting for data")
    expect(page.locator("#plot-spikes .waiting")).to_have_text("Spike rates: waiting for data")
    expect(page.locator("#tuned")).to_contain_text("none: snrl/zoo/ppo.toml has no")


def test_one_quantity_per_axis_and_trial_accuracy(page, server):
    d = server["root"] / "trial-task"
    d.mkdir()
    (d / "config.json").write_text(
        '{"algo": "ppo", "env": "PerceptualDecisionMaking-v0", "total_steps": 400}'
    )
    cols = ["env_step", "wall_time", "episode_return_mean", "eval_return_mean", "trials",
            "trial_accuracy", "eval_trial_accuracy", "policy_loss", "value_loss", "entropy",
            "approx_kl", "clip_fraction", "explained_variance", "spike_rate_lif0"]
    with open(d / "metrics.csv", "w") as f:
        f.write(",".join(cols) + "\n")
        for i in range(1, 5):
            ev = "0.8" if i % 2 == 0 else "nan"
            f.write(f"{100 * i},{i},{i},{ev},{10 * i},{0.5 + 0.1 * i},{ev},-0.01,{30 * i},"
                    f"0.6,{10.0 ** -i},0.1,{-80 + 20 * i},0.05\n")
    page.goto(url(server, "#/run/trial-task"))
    expect(page.locator("#rowcount")).to_have_attribute("data-rows", "4")
    page.locator("#plot-accuracy").scroll_into_view_if_needed()
    expect(page.locator("#plot-accuracy .gtitle")).to_have_text("Trial accuracy")
    acc = page.evaluate(
        "(() => { const p = document.getElementById('plot-accuracy');"
        " return [p.data.map(t => t.y.filter(v => v !== null).length), p.layout.title.text]; })()"
    )
    assert acc == [[4, 2], "Trial accuracy"]  # training every row, evaluations as markers
    panels = page.locator("#plots-more .plot")
    titles = ["policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
              "explained_variance"]
    expect(panels).to_have_count(len(titles))
    got = {}
    for i in range(len(titles)):
        panels.nth(i).scroll_into_view_if_needed()
        pid = panels.nth(i).get_attribute("id")
        expect(page.locator(f"#{pid} .gtitle")).to_have_count(1)
        got.update(page.evaluate(
            f"(() => {{ const p = document.getElementById('{pid}');"
            " return {[p.layout.title.text]: [p.data.length, p.layout.yaxis.type]}; })()"
        ))
    # one trace per axis; approx_kl spans three decades: a log axis; the rest linear
    assert got == {t: [1, "log" if t == "approx_kl" else "linear"] for t in titles}


def test_report_md_is_rendered_and_html_in_it_stays_text(page, server):
    d = server["root"] / "cmp-md"
    (d / "runs").mkdir(parents=True)
    (d / "compare.json").write_text('{"request": {"env": "CartPole-v1"}, "runs": []}')
    evil = '<script>document.title="pwned"</script><img src=x onerror="fetch(\'/x\')">'
    (d / "report.md").write_text(
        "# Comparison: PPO\n\nSome **bold** and `code` " + evil + "\n\n"
        "## Summary\n\n| group | final |\n|---|---|\n| lif | 27.8 |\n\n"
        "- one\n- two [link](javascript:alert(1))\n"
    )
    seen = watch_requests(page)
    page.goto(url(server, "#/compare/cmp-md"))
    report = page.locator("#report")
    expect(report.locator("h2")).to_have_text("Comparison: PPO")
    expect(report.locator("h3")).to_have_text("Summary")
    expect(report.locator("strong")).to_have_text("bold")
    assert report.locator("td").all_text_contents() == ["lif", "27.8"]
    assert report.locator("li").all_text_contents() == ["one", "two link)"]  # no javascript: link
    assert evil in report.locator("p").first.text_content()  # the HTML, as text
    assert report.locator("script, img, a").count() == 0
    assert page.title() != "pwned" and not [u for u in seen if u.endswith("/x")]


def test_a_comparison_of_two_seeds_warns_under_its_plot(page, server):
    from snrl.experiments.store import write_manifest, write_status

    d = server["root"] / "cmp-2seeds"
    d.mkdir()
    write_manifest(d, {"request": {"env": "CartPole-v1", "algo": "ppo", "seeds": 2}})
    (d / "status").mkdir()
    (d / "runs").mkdir()
    for seed in (0, 1):
        make_run(d / "runs", f"lif-s{seed}", steps=[100, 200, 300], total=300, seed=seed)
        write_status(d / "status" / f"lif-s{seed}.json",
                     {"name": f"lif-s{seed}", "group": "lif", "seed": seed, "status": "done"})
    page.goto(url(server, "#/compare/cmp-2seeds"))
    warning = page.locator("#compare-warning")
    expect(warning).to_contain_text("Only 2 seeds per group")
    expect(warning).to_be_visible()
    # right under the plot, before the tables
    assert page.evaluate(
        "document.getElementById('plot-compare').parentElement.nextElementSibling.id"
    ) == "compare-warning"



def test_multitask_run_has_a_panel_per_split_with_a_line_per_task(page, server):
    d = server["root"] / "multitask"
    d.mkdir()
    env = "snrl.tasks:GoNogo-v0,PerceptualDecisionMaking-v0"
    (d / "config.json").write_text(f'{{"algo": "ppo", "env": "{env}", "total_steps": 400}}')
    tasks = ["GoNogo-v0", "PerceptualDecisionMaking-v0"]
    cols = ["env_step", "wall_time", "episode_return_mean", "eval_return_mean", "trials",
            "trial_accuracy", "eval_trial_accuracy"]
    cols += [f"trial_accuracy/{t}" for t in tasks] + [f"eval_trial_accuracy/{t}" for t in tasks]
    with open(d / "metrics.csv", "w") as f:
        f.write(",".join(cols) + "\n")
        for i in range(1, 5):
            ev = "0.8" if i % 2 == 0 else "nan"
            f.write(f"{100 * i},{i},{i},{ev},{10 * i},0.6,{ev},0.5,0.7,{ev},{ev}\n")
    page.goto(url(server, "#/run/multitask"))
    expect(page.locator("#rowcount")).to_have_attribute("data-rows", "4")
    for pid, title in (("plot-trial_accuracy-by-task", "Training accuracy by task"),
                       ("plot-eval_trial_accuracy-by-task", "Evaluation accuracy by task")):
        page.locator(f"#{pid}").scroll_into_view_if_needed()
        expect(page.locator(f"#{pid} .gtitle")).to_have_text(title)
        names = page.evaluate(
            f"(() => document.getElementById('{pid}').data.map(t => t.name))()"
        )
        assert names == tasks
    # the per-task columns get no panel of their own
    expect(page.locator("#plots-more .plot")).to_have_count(0)

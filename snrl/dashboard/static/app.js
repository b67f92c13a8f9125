// snrl dashboard: the page. Hash routes: #/ (runs), #/run/<id>, #/launch, #/compare/<id>.
// State-changing requests (POST) send the token in the X-SNRL-Token header. Reads carry the
// cookie the first load set (HttpOnly, SameSite=Strict, a read-only key): no URL the page
// builds holds the token (video, image, EventSource), so none shows in the history, a log
// or a Referer.
"use strict";

// The page holds the token only when it was loaded with it (the address snrl dashboard
// prints): the tab keeps it (sessionStorage survives a reload, not the tab), and the address
// bar and the history entry lose it. A page loaded with the cookie alone can read, not act.
const TOKEN = (() => {
  const given = document.querySelector('meta[name="snrl-token"]').content;
  if (given) sessionStorage.setItem("snrl-token", given);
  if (location.search) history.replaceState(null, "", location.pathname + location.hash);
  return given || sessionStorage.getItem("snrl-token") || "";
})();
const main = document.getElementById("main");
const banner = document.getElementById("banner");
let cleanup = [];  // what the current view must stop when the route changes

function fileUrl(path) { return "/files/" + path.split("/").map(encodeURIComponent).join("/"); }
// Plotly reads a subset of HTML in trace names and titles (<a href>, <span style>, ...): a
// metrics column named "<a href=...>" would become a link, a style a fetch. Names are data,
// so they reach plotly escaped: with no "<" there is no tag, and plotly shows &amp; &lt; &gt;
// as the characters (tests/test_dashboard_browser.py).
function plain(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}
async function api(path, opts = {}) {
  const headers = TOKEN ? { "X-SNRL-Token": TOKEN } : {};
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method: opts.method || "GET", headers,
                                body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  return { status: r.status, ok: r.ok, data };
}
function showBanner(text, info = false) {
  banner.textContent = text; banner.hidden = !text; banner.className = "banner" + (info ? " info" : "");
}
function fmt(v, digits = 1) {
  if (v === null || v === undefined || v === "") return "";
  if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toFixed(digits);
  return String(v);
}
function statusBadge(s) { return el("span", { class: "status " + s, "data-status": s, text: s }); }

// ---------------------------------------------------------------- router
function route() {
  for (const f of cleanup) f();
  cleanup = [];
  showBanner("");
  const h = decodeURIComponent(location.hash.slice(1) || "/");
  document.getElementById("nav-runs").classList.toggle("active", h === "/");
  document.getElementById("nav-launch").classList.toggle("active", h === "/launch");
  main.replaceChildren();
  window.scrollTo(0, 0);  // a view opens at its top (the form was scrolled down at Launch)
  if (h.startsWith("/doc/")) return docView(h.slice(5));
  if (h.startsWith("/run/")) return runView(h.slice(5));
  if (h.startsWith("/compare/")) return compareView(h.slice(9));
  if (h === "/launch") return launchView();
  return listView();
}
window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);

// ---------------------------------------------------------------- run list
const COLUMNS = [
  ["id", "run"], ["status", "status"], ["algo", "algo"], ["env", "env"], ["backbone", "backbone"],
  ["hidden_size", "hidden", "num"], ["dale", "Dale"], ["seed", "seed", "num"],
  ["steps", "steps done / total", "num"], ["best_eval", "best eval", "num"],
  ["last_return", "last return", "num"],
];
const listState = { sort: "id", dir: 1, filter: "", status: "" };

function listView() {
  const filter = el("input", { id: "filter", type: "search", placeholder: "filter (any column)",
                              value: listState.filter, size: 28 });
  const status = el("select", { id: "status-filter" },
    ...["", "running", "finished", "failed", "killed-resumable"].map(
      s => el("option", { value: s, text: s || "any status", selected: s === listState.status })));
  const count = el("span", { class: "muted", id: "run-count" });
  const table = el("table", { id: "runs" });
  const comps = el("div", { id: "comparisons" });
  const found = el("p", { class: "muted", id: "found", hidden: true });
  main.append(el("h1", { text: "Runs" }), el("div", { class: "toolbar" }, filter, status, count),
              found, table, comps);
  let data = { runs: [], comparisons: [] };
  function draw() {
    const f = listState.filter.toLowerCase();
    let rows = data.runs.filter(r => (!listState.status || r.status === listState.status) &&
      (!f || COLUMNS.some(([k]) => String(r[k] ?? "").toLowerCase().includes(f))));
    const k = listState.sort, d = listState.dir;
    rows.sort((a, b) => {
      const x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * d;
    });
    count.textContent = `${rows.length} of ${data.runs.length} runs · ${data.running} of at most ${data.max_runs} started here running`;
    const head = el("tr", {}, ...COLUMNS.map(([key, label, cls]) => el("th", {
      class: (cls || "") + (key === k ? (d > 0 ? " sorted-asc" : " sorted-desc") : ""), "data-key": key,
      text: label, onclick: () => { listState.dir = listState.sort === key ? -listState.dir : 1;
                                    listState.sort = key; draw(); } })));
    const body = el("tbody");
    for (const r of rows) {
      const pct = r.total_steps ? Math.min(100, 100 * r.steps / r.total_steps) : 0;
      const cell = (key, cls, ...children) => el("td", { class: cls, "data-col": key }, ...children);
      body.append(el("tr", { "data-run": r.id },
        cell("id", "", el("a", { href: "#/run/" + encodeURIComponent(r.id), text: r.id })),
        el("td", { title: [r.reason, r.problem].filter(Boolean).join("; "), "data-col": "status" }, statusBadge(r.status)),
        cell("algo", "", r.algo ?? ""), cell("env", "", r.env ?? ""), cell("backbone", "", r.backbone ?? ""),
        cell("hidden_size", "num", fmt(r.hidden_size)),
        cell("dale", "", r.dale === null || r.dale === undefined ? "" : (r.dale ? "yes" : "no")),
        cell("seed", "num", fmt(r.seed)),
        cell("steps", "num", el("span", { class: "bar" }, el("span", { style: `width:${pct}%` })),
             `${fmt(r.steps)} / ${fmt(r.total_steps)}`),
        cell("best_eval", "num", fmt(r.best_eval)), cell("last_return", "num", fmt(r.last_return))));
    }
    table.replaceChildren(el("thead", {}, head), body);
    // an empty list says what the folder holds instead; one run directory says so
    found.textContent = data.found || (data.only ? `one run directory: ${data.root} (serve its parent to see and launch others)` : "");
    found.hidden = !found.textContent;
    comps.replaceChildren();
    if (data.comparisons.length) {
      comps.append(el("h2", { text: "Comparisons" }), el("ul", {}, ...data.comparisons.map(
        c => el("li", {}, el("a", { href: "#/compare/" + encodeURIComponent(c), text: c })))));
    }
  }
  filter.addEventListener("input", () => { listState.filter = filter.value; draw(); });
  status.addEventListener("change", () => { listState.status = status.value; draw(); });
  async function load() {
    const r = await api("/api/runs");
    if (!r.ok) { showBanner((r.data && r.data.error) || `error ${r.status}`); return; }
    data = r.data;
    document.getElementById("root-dir").textContent = data.root;
    draw();
  }
  load();
  const timer = setInterval(load, 3000);
  cleanup.push(() => clearInterval(timer));
}

// ---------------------------------------------------------------- one run
const REDRAW_MS = 1000, OTHERS_REDRAW_MS = 4000;
const SKIP = new Set(["env_step", "wall_time", "episodes", "lr", "lesson", "trials"]);
// One quantity per axis (small multiples): a value loss of 30 would flatten a policy loss of
// 0.01 on a shared axis, an explained variance of -80 the entropy, KL and clip fraction.
// The panels: return and trial accuracy (training line, evaluations as markers), spike rates
// (one unit: several layers share it), then one panel per other numeric column.
function panels(header) {
  const out = [{ id: "plot-return", title: "Return", y: "episode_return_mean", evalY: "eval_return_mean",
                 ytitle: "mean episode return", fast: true }];
  if (header.includes("trial_accuracy") || header.includes("eval_trial_accuracy")) {
    out.push({ id: "plot-accuracy", title: "Trial accuracy", y: "trial_accuracy", evalY: "eval_trial_accuracy",
               ytitle: "fraction of trials correct", fast: true, range: [0, 1.02] });
  }
  // a multitask run (snrl train --tasks): one line per task, training and evaluation
  const perTask = [];
  for (const [prefix, title] of [["trial_accuracy/", "Training accuracy by task"],
                                 ["eval_trial_accuracy/", "Evaluation accuracy by task"]]) {
    const cols = header.filter(c => c.startsWith(prefix));
    perTask.push(...cols);
    if (cols.length) {
      out.push({ id: "plot-" + prefix.replace("/", "-by-task"), title, spikes: cols, prefix,
                 ytitle: "fraction of trials correct", range: [0, 1.02] });
    }
  }
  const spikes = header.filter(c => c.startsWith("spike_rate"));
  out.push({ id: "plot-spikes", title: "Spike rates", spikes, prefix: "spike_rate_",
             ytitle: spikes.length ? "spikes per neuron per step" : "(no spiking layer)" });
  const rest = header.filter(c => !SKIP.has(c) && !spikes.includes(c) && !c.startsWith("eval_") &&
                              !c.startsWith("episode_") && c !== "trial_accuracy" &&
                              !perTask.includes(c));
  const losses = rest.filter(c => c.includes("loss"));
  for (const c of [...losses, ...rest.filter(c => !losses.includes(c))]) {
    out.push({ id: "plot-col-" + header.indexOf(c), title: c, y: c, ytitle: c,
               kind: losses.includes(c) ? "loss" : "stat" });
  }
  return out;
}
// a log axis where it helps: every value positive and spanning over two decades
function axisType(values) {
  const v = values.filter(x => x !== null && x !== undefined && isFinite(x));
  if (!v.length || v.some(x => x <= 0)) return "linear";
  return Math.max(...v) / Math.min(...v) > 100 ? "log" : "linear";
}
// snrl.palette's group colours (Okabe-Ito), given by the server in <body data-palette>
const PALETTE = JSON.parse(document.body.dataset.palette);
const LAYOUT = (title, ytitle) => ({
  colorway: PALETTE,
  title: { text: title, font: { size: 14 } }, margin: { l: 56, r: 16, t: 36, b: 44 },
  xaxis: { title: { text: "env step" } }, yaxis: { title: { text: ytitle } },
  legend: { orientation: "h", y: -0.25 }, font: { size: 12 },
});
const WAITING = "waiting for data";
function plotBox(id, title, small = false) {
  return el("div", { class: "plot" + (small ? " small" : ""), id, "data-title": title },
            el("div", { class: "waiting", text: `${title}: ${WAITING}` }));
}

function runView(runId) {
  const title = el("h1", {}, runId, " ", el("span", { id: "run-status" }));
  const actions = el("div", { class: "actions", id: "actions" });
  const progress = el("p", { class: "muted", id: "progress" });
  const plots = el("div", { class: "plots", id: "plots-main" }, plotBox("plot-return", "Return"));
  const small = el("div", { class: "plots small", id: "plots-more" });
  const media = el("div", { class: "media", id: "media" });
  const tuned = el("p", { id: "tuned" });
  const config = el("div", { class: "kv", id: "config" });
  const analysis = el("div", { id: "analysis" });
  const log = el("details", { id: "log-box" }, el("summary", { text: "launch log" }), el("pre", { id: "log" }));
  main.append(title, progress, actions, el("h2", { text: "Learning curve, trial accuracy, spike rates, losses (live)" }),
              el("p", { class: "muted", id: "rowcount", "data-rows": "0", text: "0 metrics rows" }), plots,
              el("p", { class: "muted", text: "One quantity per plot; a quantity spanning over two decades gets a log axis." }),
              small,
              el("h2", { text: "Videos and figures" }), media, analysis,
              el("h2", { text: "Config" }), el("div", { class: "card" }, tuned, config), log);
  let header = [], rows = [], info = null, layout = panels([]);
  const byId = () => Object.fromEntries(layout.map(p => [p.id, p]));
  const col = name => header.indexOf(name);
  function column(name) { const i = col(name); return i < 0 ? [] : rows.map(r => r[i]); }
  // a plot is drawn only while it is on screen (and the tab shown); one that missed rows is
  // drawn when it comes into view
  const visible = new Set(), dirty = new Set();
  const observer = new IntersectionObserver(entries => {
    for (const e of entries) {
      if (e.isIntersecting) { visible.add(e.target.id); if (dirty.has(e.target.id)) drawPlot(e.target.id); }
      else visible.delete(e.target.id);
    }
  });
  // the panels follow the header: the main ones on top, one small panel per other quantity
  function buildPanels() {
    layout = panels(header);
    const have = new Set([...plots.children, ...small.children].map(d => d.id));
    const want = layout.map(p => p.id);
    if (want.length === have.size && want.every(id => have.has(id))) return;
    observer.disconnect(); visible.clear();
    const make = (p, isSmall) => plotBox(p.id, p.title, isSmall);
    plots.replaceChildren(...layout.filter(p => p.fast || p.spikes).map(p => make(p, false)));
    small.replaceChildren(...layout.filter(p => !p.fast && !p.spikes).map(p => make(p, true)));
    for (const d of [...plots.children, ...small.children]) { dirty.add(d.id); observer.observe(d); }
  }
  for (const p of plots.children) observer.observe(p);
  const onShow = () => { if (!document.hidden) for (const id of [...dirty]) drawPlot(id); };
  document.addEventListener("visibilitychange", onShow);
  function drawPlot(id) {
    const p = byId()[id];
    if (!header.length || !rows.length || !p) return;  // the box says "waiting for data"
    if (!visible.has(id) || document.hidden) { dirty.add(id); return; }
    dirty.delete(id);
    const box = document.getElementById(id);
    const wait = box.querySelector(":scope > .waiting");
    if (wait) wait.remove();
    const x = column("env_step");
    let traces, lay;
    if (p.spikes) {
      traces = p.spikes.map(c => ({ x, y: column(c), name: plain(c.replace(p.prefix, "")), mode: "lines",
                                    connectgaps: true }));
      lay = LAYOUT(p.title, p.ytitle);
      if (p.range) lay.yaxis.range = p.range;
    } else {
      traces = [];
      if (col(p.y) >= 0) {
        traces.push({ x, y: column(p.y), name: p.evalY ? "training" : plain(p.y), mode: "lines",
                      line: { color: PALETTE[0] } });
      }
      if (p.evalY && col(p.evalY) >= 0) {
        const ex = [], ey = [];
        column(p.evalY).forEach((v, i) => { if (v !== null) { ex.push(x[i]); ey.push(v); } });
        traces.push({ x: ex, y: ey, name: "evaluation", mode: "markers", marker: { color: PALETTE[1], size: 8 } });
      }
      lay = LAYOUT(plain(p.title), plain(p.ytitle));
      if (p.range) lay.yaxis.range = p.range;
      if (!p.evalY) {
        lay.yaxis.type = axisType(column(p.y));
        lay.showlegend = false;
        lay.margin = { l: 56, r: 12, t: 32, b: 36 };
        lay.xaxis.title.text = "";
      }
    }
    Plotly.react(id, traces, lay, { responsive: true });
  }
  function redraw() {
    document.getElementById("rowcount").textContent = `${rows.length} metrics rows`;
    document.getElementById("rowcount").dataset.rows = rows.length;
    buildPanels();
    for (const p of layout) if (p.fast) drawPlot(p.id);
  }
  function redrawOthers() { buildPanels(); for (const p of layout) if (!p.fast) drawPlot(p.id); }
  function showStatus(s) {
    const st = document.getElementById("run-status");
    st.replaceChildren(statusBadge(s.status));
    st.title = s.reason || "";
    progress.textContent = `${s.algo ?? "?"} · ${s.env ?? "?"} · ${s.backbone ?? "?"}` +
      `${s.dale ? " (Dale)" : ""} · seed ${fmt(s.seed)} · ${fmt(s.steps)} / ${fmt(s.total_steps)} env steps` +
      (s.best_eval !== null && s.best_eval !== undefined ? ` · best eval ${fmt(s.best_eval)}` : "") +
      (s.reason ? ` · ${s.reason}` : "");
    drawActions(s);
  }
  let lastActions = "";
  function drawActions(s) {
    const key = s.status + (info && info.launched);
    if (key === lastActions) return;
    lastActions = key;
    const seed = el("input", { id: "render-seed", type: "number", value: "0", min: "0", style: "width:6em" });
    const fmtSel = el("select", { id: "render-format" }, el("option", { text: "mp4" }), el("option", { text: "gif" }));
    actions.replaceChildren(...[
      s.status === "running" ? el("button", { id: "stop", class: "secondary", text: "Stop (SIGINT, resumable)",
        onclick: async () => { const r = await api(`/api/run/${runId}/stop`, { method: "POST" });
                               showBanner(r.ok ? "SIGINT sent: the run stops after writing its checkpoint" :
                                          r.data.error, r.ok); } }) : null,
      s.status === "killed-resumable" ? el("button", { id: "resume", text: "Resume",
        onclick: async () => { const r = await api(`/api/run/${runId}/resume`, { method: "POST" });
                               showBanner(r.ok ? "resumed" : r.data.error, r.ok); } }) : null,
      el("span", { class: "muted", text: "render a video, seed" }), seed, fmtSel,
      el("button", { id: "render", class: "secondary", text: "Render video",
        onclick: async () => {
          const r = await api(`/api/run/${runId}/render`, { method: "POST",
                              body: { seed: parseInt(seed.value || "0", 10), format: fmtSel.value } });
          showBanner(r.ok ? `rendering ${r.data.out} (it appears below when written)` : r.data.error, r.ok);
        } })].filter(Boolean));
  }
  function drawFiles() {
    const items = [];
    for (const f of info.files) {
      const name = f.path.split("/").slice(-2).join("/");
      if (f.kind === "video" && f.path.toLowerCase().endsWith(".mp4")) {
        items.push(el("figure", {}, el("video", { src: fileUrl(f.path), controls: true, preload: "auto",
                                                  "data-path": f.path }), el("figcaption", { text: name })));
      } else {
        items.push(el("figure", {}, el("img", { src: fileUrl(f.path), alt: name, loading: "lazy",
                                                "data-path": f.path }), el("figcaption", { text: name })));
      }
    }
    media.replaceChildren(...(items.length ? items : [el("p", { class: "muted", text: "none yet" })]));
    analysis.replaceChildren();
    if (info.analysis) {
      analysis.append(el("details", {}, el("summary", { text: "analysis/summary.json (snrl analyze)" }),
                         el("pre", { text: JSON.stringify(info.analysis, null, 1) })));
    }
    tuned.replaceChildren(el("strong", { text: "tuned settings: " }), info.tuned || "");
    config.replaceChildren(...Object.entries(info.config || {}).map(([k, v]) =>
      el("div", {}, el("span", { text: k + " = " }), typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))));
  }
  let filesKey = "";
  async function loadInfo() {
    const r = await api("/api/run/" + runId);
    if (!r.ok) { showBanner(r.data ? r.data.error : `error ${r.status}`); return; }
    info = r.data;
    const key = JSON.stringify([info.files, info.config, !!info.analysis]);
    if (key !== filesKey) { filesKey = key; drawFiles(); }
    showStatus(info);
    if (info.launched) {
      const t = await fetch("/api/log/" + encodeURIComponent(runId));
      if (t.ok) document.getElementById("log").textContent = await t.text();
    } else log.hidden = true;
  }
  loadInfo();
  const timer = setInterval(loadInfo, 5000);
  const es = new EventSource(`/api/run/${runId.split("/").map(encodeURIComponent).join("/")}/events`);
  es.addEventListener("header", e => { header = JSON.parse(e.data); rows = []; });
  es.addEventListener("reset", () => { header = []; rows = []; redraw(); redrawOthers(); });
  // a plot redraw costs the browser far more than a row costs the server (measured:
  // benchmarks/bench_dashboard.py), and a run writes rows faster than anyone reads them
  // (the learning curve at most once a second, the other three plots every few seconds)
  let lastDraw = 0, pending = null, lastOthers = 0, othersPending = null;
  function scheduleRedraw() {
    const now = Date.now();
    if (!pending) {
      pending = setTimeout(() => { pending = null; lastDraw = Date.now(); redraw(); },
                           Math.max(0, lastDraw + REDRAW_MS - now));
    }
    if (!othersPending) {
      othersPending = setTimeout(() => { othersPending = null; lastOthers = Date.now(); redrawOthers(); },
                                 Math.max(0, lastOthers + OTHERS_REDRAW_MS - now));
    }
  }
  es.addEventListener("rows", e => { rows.push(...JSON.parse(e.data)); scheduleRedraw(); });
  es.addEventListener("status", e => showStatus(JSON.parse(e.data)));
  cleanup.push(() => {
    es.close(); clearInterval(timer); clearTimeout(pending); clearTimeout(othersPending);
    observer.disconnect(); document.removeEventListener("visibilitychange", onShow);
  });
  redraw();
  redrawOthers();
}

// ---------------------------------------------------------------- launch form
function defaultText(f) {
  const v = f.default;
  if (v === null) return "none";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "object") return Object.keys(v).length || Array.isArray(v) && v.length ? JSON.stringify(v) : (Array.isArray(v) ? "" : "{}");
  return String(v);
}
const CURRICULUM_EXAMPLE = '[{"name": "easy", "env_kwargs": {"timing": {"delay": 500}}, ' +
  '"metric": "eval_return_mean", "threshold": 0.5}, {"name": "hard", "env_kwargs": {}}]';

// the fields a first run sets, in this order, above the others (which are under "Advanced")
const BASIC = ["env", "backbone", "force_dale_law", "hidden_size", "total_steps", "seed", "tuned"];
// a help text in one line: its first sentence (the whole text on hover, and the docs)
function oneLine(text) {
  const t = text.replaceAll("``", "").replace(/\s+/g, " ").trim();
  const m = t.match(/^.*?[.;](?=\s+[A-Z(])/);
  let first = m ? m[0] : t;
  if (first.length > 110) first = first.slice(0, first.lastIndexOf(" ", 106)) + " …";
  return first;
}
const DOC_ANCHOR = { ppo: "agents.md/hyperparameters-snrlppoconfig", a2c: "agents.md/hyperparameters-snrla2cconfig", dqn: "agents.md/hyperparameters-snrldqnconfig" };

async function launchView() {
  const r = await api("/api/schema");
  if (!r.ok) { showBanner(r.data ? r.data.error : `error ${r.status}`); return; }
  const schemas = r.data;
  const algo = el("select", { id: "f-algo", name: "algo" }, ...Object.keys(schemas).map(a => el("option", { value: a, text: a })));
  const name = el("input", { id: "f-name", name: "name", placeholder: "e.g. cartpole-lif-s0", required: true });
  const envToken = el("input", { id: "f-env_token", type: "password", autocomplete: "off",
                                 placeholder: "only for an http:// env (SNRL_ENV_TOKEN)" });
  const formErr = el("div", { class: "form-error", id: "error-_form" });
  const basicBox = el("div", { class: "grid", id: "fields-basic" });
  const fieldsBox = el("div", { class: "grid", id: "fields" });
  const advanced = el("details", { id: "advanced", class: "card" },
    el("summary", { id: "advanced-summary", text: "Advanced" }),
    el("div", { class: "grid" },
      el("div", { class: "field" }, el("label", { for: "f-env_token", text: "remote env token" }), envToken,
         el("div", { class: "doc", text: "for env = http://host:port (snrl serve-env); sent in the environment, never on a command line" }))),
    fieldsBox);
  const submit = el("button", { id: "launch", type: "submit", text: "Launch snrl train" });
  const form = el("form", { id: "launch-form", novalidate: true },
    el("div", { class: "card" },
      el("div", { class: "grid" },
        el("div", { class: "field" }, el("label", { for: "f-name", text: "run name" }), name,
           el("div", { class: "doc", text: "the run directory RUNS_DIR/<name>" }), el("div", { class: "error", id: "error-name" })),
        el("div", { class: "field" }, el("label", { for: "f-algo", text: "algo" }), algo, el("div", { class: "error", id: "error-algo" }))),
      basicBox),
    el("p", {}, submit),
    el("p", { class: "muted", text: "Every field is a config key of snrl train (--set key=value), with its default; leave a field as it is to keep the default. The server checks the values with the CLI's own code." }),
    advanced, formErr);
  main.append(el("h1", { text: "Launch a run" }), form);
  const runs = await api("/api/runs");
  if (runs.ok && runs.data.only) {
    showBanner(`this dashboard shows one run directory (${runs.data.root}): serve the folder that holds runs to launch new ones`);
  }
  let fields = [];
  function drawFields() {
    fields = schemas[algo.value];
    const boxes = {};
    for (const f of fields) {
      const id = "f-" + f.name, dflt = defaultText(f);
      let input;
      if (f.kind === "bool") {
        input = el("select", { id, name: f.name }, ...["true", "false"].map(v => el("option", { value: v, text: v, selected: v === dflt })));
      } else if (f.kind === "choice") {
        input = el("select", { id, name: f.name }, ...f.choices.map(v => el("option", { value: String(v), text: String(v), selected: String(v) === dflt })));
      } else if (f.kind === "json") {
        input = el("textarea", { id, name: f.name, rows: f.name === "curriculum" ? 4 : 2,
                                 placeholder: f.name === "curriculum" ? "none, or JSON lessons, e.g. " + CURRICULUM_EXAMPLE : "" });
        input.value = dflt;
      } else {
        input = el("input", { id, name: f.name, value: dflt, list: f.choices ? id + "-choices" : null,
                              inputmode: f.kind === "int" || f.kind === "float" ? "decimal" : null });
      }
      input.dataset.default = dflt;
      input.addEventListener("change", () => check());
      const full = f.doc.replaceAll("``", "") + (f.name === "env" ? " Or a remote env: http://host:port (docs/remote.md)." : "");
      boxes[f.name] = el("div", { class: "field" + (f.kind === "json" ? " wide" : ""), "data-field": f.name },
        el("label", { for: id }, f.name, " ", el("span", { class: "type", text: f.type + (f.min ? `, ≥ ${f.min}` : "") })),
        input,
        f.choices && f.kind !== "choice" ? el("datalist", { id: id + "-choices" }, ...f.choices.map(c => el("option", { value: c }))) : null,
        el("div", { class: "doc" }, el("span", { class: "text", title: full, text: oneLine(full) }),
           el("a", { href: "#/doc/" + DOC_ANCHOR[algo.value], target: "_blank", rel: "noopener", text: "docs" })),
        el("div", { class: "error", id: "error-" + f.name }));
    }
    const basic = BASIC.filter(n => boxes[n]);
    basicBox.replaceChildren(...basic.map(n => boxes[n]));
    const rest = fields.map(f => f.name).filter(n => !basic.includes(n));
    fieldsBox.replaceChildren(...rest.map(n => boxes[n]));
    document.getElementById("advanced-summary").textContent = `Advanced: ${rest.length + 1} more settings (each keeps its default)`;
  }
  function values() {
    const out = {};
    for (const f of fields) {
      const input = document.getElementById("f-" + f.name);
      if (input.value.trim() !== input.dataset.default) out[f.name] = input.value.trim();
    }
    return out;
  }
  function showErrors(errors) {
    for (const e of main.querySelectorAll(".error, .form-error")) e.textContent = "";
    for (const e of main.querySelectorAll(".field.invalid")) e.classList.remove("invalid");
    for (const [k, msg] of Object.entries(errors || {})) {
      const slot = document.getElementById("error-" + k) || formErr;
      slot.textContent = "error: " + msg;
      if (slot.parentElement && slot.parentElement.classList.contains("field")) slot.parentElement.classList.add("invalid");
      if (advanced.contains(slot)) advanced.open = true;  // an error is never hidden
    }
  }
  async function check() {
    const r = await api("/api/validate", { method: "POST", body: { algo: algo.value, values: values() } });
    if (r.data) showErrors(r.data.errors);
  }
  algo.addEventListener("change", () => { drawFields(); showErrors({}); });
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    submit.disabled = true;
    try {
      const r = await api("/api/launch", { method: "POST", body: { algo: algo.value, name: name.value.trim(),
                                                                  values: values(), env_token: envToken.value } });
      if (r.status === 201) { location.hash = "#/run/" + encodeURIComponent(r.data.id); return; }
      if (r.status === 422) { showErrors(r.data.errors); showBanner("the run was not started: see the fields marked in red"); }
      else showBanner((r.data && r.data.error) || `error ${r.status}`);
    } finally { submit.disabled = false; }
  });
  drawFields();
}

// ---------------------------------------------------------------- markdown
// report.md and the docs, rendered from text to DOM nodes (textContent only, never
// innerHTML): HTML in the text stays text, so a crafted report runs nothing. Headings,
// paragraphs, lists, pipe tables, code blocks, `code`, **bold**, *italic*, links (http(s),
// or a doc of the dashboard), images inside the comparison folder (fileBase).
function slug(text) { return text.toLowerCase().replace(/[^a-z0-9 -]/g, "").trim().replace(/ /g, "-"); }
function inline(text, fileBase) {
  const out = [];
  const re = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(!?\[[^\]]*\]\([^)\s]+\))/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    if (m[1]) out.push(el("code", { text: t.slice(1, -1) }));
    else if (m[2]) out.push(el("strong", {}, ...inline(t.slice(2, -2), fileBase)));
    else if (m[3]) out.push(el("em", {}, ...inline(t.slice(1, -1), fileBase)));
    else {
      const [, bang, label, href] = t.match(/^(!?)\[([^\]]*)\]\(([^)\s]+)\)$/);
      const local = !/^[a-z]+:|^\/|(^|\/)\.\.(\/|$)/i.test(href);
      if (bang && fileBase !== null && local && /\.(png|gif|jpe?g|webp)$/i.test(href)) {
        out.push(el("img", { src: fileUrl(fileBase + "/" + href), alt: label }));
      } else if (!bang && /^https?:\/\//i.test(href)) {
        out.push(el("a", { href, rel: "noopener noreferrer", target: "_blank", text: label }));
      } else if (!bang && local && /^[a-z_]+\.md(#.*)?$/.test(href)) {
        const [doc, anchor] = href.split("#");
        out.push(el("a", { href: "#/doc/" + doc + (anchor ? "/" + anchor : ""), text: label }));
      } else out.push(label);
    }
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
function markdown(text, fileBase = null) {
  const root = el("div", { class: "markdown" });
  const lines = String(text).split("\n");
  const cells = l => l.trim().replace(/^\||\|$/g, "").split("|").map(c => c.trim());
  for (let i = 0; i < lines.length;) {
    const line = lines[i];
    if (/^```/.test(line)) {
      const code = [];
      for (i++; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
      i++;
      root.append(el("pre", { text: code.join("\n") }));
    } else if (/^#{1,6} /.test(line)) {
      const [, hashes, body] = line.match(/^(#+) (.*)$/);
      root.append(el("h" + Math.min(6, hashes.length + 1), { id: "md-" + slug(body) }, ...inline(body, fileBase)));
      i++;
    } else if (/^\s*\|/.test(line) && i + 1 < lines.length && /^\s*\|?\s*:?-{3,}/.test(lines[i + 1])) {
      const head = cells(line), body = [];
      for (i += 2; i < lines.length && /^\s*\|/.test(lines[i]); i++) body.push(cells(lines[i]));
      root.append(el("div", { class: "table-wrap" }, el("table", {},
        el("thead", {}, el("tr", {}, ...head.map(c => el("th", {}, ...inline(c, fileBase))))),
        el("tbody", {}, ...body.map(r => el("tr", {}, ...r.map(c => el("td", {}, ...inline(c, fileBase)))))))));
    } else if (/^\s*([-*]|\d+\.) /.test(line)) {
      const ordered = /^\s*\d+\./.test(line), list = el(ordered ? "ol" : "ul");
      for (; i < lines.length && /^\s*([-*]|\d+\.) /.test(lines[i]); i++) {
        let item = lines[i].replace(/^\s*([-*]|\d+\.) /, "");
        for (; i + 1 < lines.length && /^\s{2,}\S/.test(lines[i + 1]) && !/^\s*([-*]|\d+\.) /.test(lines[i + 1]); i++) item += " " + lines[i + 1].trim();
        list.append(el("li", {}, ...inline(item, fileBase)));
      }
      root.append(list);
    } else if (!line.trim()) {
      i++;
    } else {
      const para = [];
      for (; i < lines.length && lines[i].trim() && !/^(#{1,6} |```|\s*\||\s*([-*]|\d+\.) )/.test(lines[i]); i++) para.push(lines[i]);
      root.append(el("p", {}, ...inline(para.join(" "), fileBase)));
    }
  }
  return root;
}

// ---------------------------------------------------------------- docs (docs/*.md, offline)
async function docView(path) {
  const [name, anchor] = path.split("/");
  const r = await api("/api/doc/" + encodeURIComponent(name));
  if (!r.ok) { showBanner((r.data && r.data.error) || `error ${r.status}`); return; }
  main.append(el("p", { class: "muted", text: "docs/" + name }), markdown(r.data.text));
  const target = anchor && document.getElementById("md-" + anchor);
  if (target) target.scrollIntoView();
}

// ---------------------------------------------------------------- comparison
async function compareView(compId) {
  const r = await api("/api/comparison/" + compId);
  if (!r.ok) { showBanner(r.data ? r.data.error : `error ${r.status}`); return; }
  const c = r.data;
  const req = c.request.request || c.request;
  main.append(el("h1", { text: "Comparison " + compId }),
              el("p", { class: "muted", text: ["env", "algo", "steps", "seeds"].filter(k => req[k] !== undefined)
                                           .map(k => `${k} ${JSON.stringify(req[k])}`).join(" · ") }),
              el("div", { class: "plots" }, el("div", { class: "plot", id: "plot-compare", style: "height:380px" })));
  const traces = [];
  Object.entries(c.curves).forEach(([g, cv], i) => {
    const color = PALETTE[i % PALETTE.length];
    traces.push({ x: cv.steps, y: cv.high, mode: "lines", line: { width: 0 }, showlegend: false, hoverinfo: "skip",
                  legendgroup: g });
    traces.push({ x: cv.steps, y: cv.low, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: color + "33",
                  showlegend: false, hoverinfo: "skip", legendgroup: g });
    traces.push({ x: cv.steps, y: cv.mean, mode: "lines", line: { color, width: 2 }, name: plain(`${g} (${cv.n_seeds} seeds)`),
                  legendgroup: g });
  });
  Plotly.react("plot-compare", traces, LAYOUT("Mean episode return, 95% bootstrap band over seeds", "mean episode return"),
               { responsive: true });
  // under the plot, as on curves.png: a band over 2 seeds is no confidence interval to trust
  if (c.warning) main.append(el("p", { class: "warning", id: "compare-warning", text: c.warning }));
  if (c.summary) {
    const [head, ...rows] = c.summary;
    main.append(el("h2", { text: "Summary (summary.csv)" }),
      el("div", { style: "overflow:auto" }, el("table", { id: "summary" }, el("thead", {}, el("tr", {}, ...head.map(h => el("th", { text: h })))),
        el("tbody", {}, ...rows.map(r => el("tr", {}, ...r.map(v => { const n = Number(v);
          return el("td", { class: v !== "" && !isNaN(n) ? "num" : "", text: v !== "" && !isNaN(n) && !Number.isInteger(n) ? n.toPrecision(4) : v }); })))))));
  }
  main.append(el("h2", { text: "Runs" }), el("table", { id: "compare-runs" },
    el("thead", {}, el("tr", {}, ...["run", "group", "seed", "status"].map(h => el("th", { text: h })))),
    el("tbody", {}, ...c.runs.map(x => el("tr", {},
      el("td", {}, el("a", { href: "#/run/" + encodeURIComponent(compId + "/runs/" + x.name), text: x.name })),
      el("td", { text: x.group }), el("td", { text: fmt(x.seed) }), el("td", { text: x.status + (x.error ? ": " + x.error : "") }))))));
  if (c.figures.length) {
    main.append(el("h2", { text: "Figures" }), el("div", { class: "media" }, ...c.figures.map(p =>
      el("figure", {}, el("img", { src: fileUrl(p), alt: p }), el("figcaption", { text: p })))));
  }
  if (c.report) {
    main.append(el("h2", { text: "Report (report.md)" }),
                el("div", { class: "card", id: "report" }, markdown(c.report, compId)));
  }
}

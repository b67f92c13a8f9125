"""What the dashboard knows about the directories under RUNS_DIR: runs, their status, their
metrics, and comparison directories -- all read from the files the CLI writes.

A *run* is a directory holding the manifest of :mod:`snrl.training.rundir` or a
``config.json``; a *comparison* holds the manifest of :mod:`snrl.experiments.store`
(``compare.json``). Runs are found at depth 1 and 2 of RUNS_DIR (``RUNS_DIR/name`` and
``RUNS_DIR/group/name``); a comparison's own runs are shown in its view.

The status of a run (nothing records it on disk while it trains, so it is derived):

* ``running``: launched by this dashboard and its process is alive; or, for a run started
  elsewhere, ``metrics.csv`` was written less than :data:`RUNNING_WINDOW_S` ago and the run
  has not reached ``total_steps``;
* ``finished``: the last metrics row reached ``total_steps``;
* ``failed``: stopped before ``total_steps`` by an error (the dashboard's launch log ends in an
  ``error:`` line that is not an interruption), or without a checkpoint to resume from;
* ``killed-resumable``: stopped before ``total_steps`` with ``checkpoints/last.pt`` written
  (``snrl train --out DIR --resume`` continues it).

Summaries are cached by the (mtime, size) of the files they read, and ``metrics.csv`` is read
incrementally: only the bytes appended since the last look (a file that shrank, which a
``--resume`` does when it drops rows past the checkpoint, is read again from the start).

A run folder is data, and may be crafted (docs/reliability.md, "The dashboard"): every file
is opened by :func:`open_regular` (a regular file inside RUNS_DIR, never a FIFO, a device or
a link out of RUNS_DIR), read up to a cap (a long ``metrics.csv`` shows its last
:data:`MAX_METRICS_READ` bytes of rows), JSON is parsed with a bound on its nesting
(:func:`loads_bounded`), and a run that cannot be read shows in the list with the reason
instead of breaking the list.
"""

from __future__ import annotations

import math
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from snrl.errors import describe
from snrl.experiments.store import MANIFEST as COMPARE_MANIFEST
from snrl.io import MAX_DEPTH, load_json
from snrl.training.rundir import ANALYSIS_DIR, MANIFEST

__all__ = [
    "LAUNCH_DIR",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_LINE",
    "MAX_METRICS_READ",
    "NAME_RE",
    "RUNNING_WINDOW_S",
    "RunIndex",
    "folder_kind",
    "found_instead",
    "loads_bounded",
    "metrics_rows",
    "open_regular",
    "parse_rows",
    "read_capped",
    "tuned_note",
]

#: The dashboard's own folder in RUNS_DIR: launch records and the logs of launched processes
#: (a run directory itself holds only what snrl writes; see snrl.training.rundir).
LAUNCH_DIR = ".snrl-dashboard"
#: A run not launched by this dashboard counts as running while its metrics.csv changed in
#: this many seconds (nothing on disk says whether a process still writes a run).
RUNNING_WINDOW_S = 120.0
#: Videos the run view plays (mp4 in a <video>, gif as an image).
VIDEO_EXTS = (".mp4", ".gif")
#: Largest JSON file the dashboard reads (config.json, a launch record, summary.json ...),
#: and the largest text file it shows (report.md, summary.csv, a log's tail), bytes.
MAX_JSON_BYTES = 4 * 1024 * 1024
#: Deepest nesting of JSON arrays and objects the dashboard accepts, in a file or a request
#: body (snrl's own files nest a few levels; Python's parser fails near 1,000).
MAX_JSON_DEPTH = MAX_DEPTH
#: Most bytes of metrics.csv read at one look: a longer file (or a longer appended part) is
#: read from its last MAX_METRICS_READ bytes on (its newest rows), so a huge or sparse file
#: costs a bounded time and memory.
MAX_METRICS_READ = 16 * 1024 * 1024
#: Longest line of metrics.csv taken (header included); a longer one is not a row.
MAX_LINE = 64 * 1024
#: A run name the launch form accepts (the run directory RUNS_DIR/<name>), and the name of a
#: launch record (a file of LAUNCH_DIR).
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
#: A launch log's name in a launch record (a file of LAUNCH_DIR, nothing else).
_LOG_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.log\Z")


def inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether ``path``, links resolved, is ``root`` or lies under it (``root`` resolved)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def open_regular(path: Path, root: Path | None = None) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file (and, with ``root``, resolves to a
    path inside ``root``).

    A run folder may hold anything: a FIFO named ``metrics.csv`` would block ``open`` forever,
    a link to ``/dev/zero`` would never end, a link to ``~/.ssh/...`` would be shown. The type
    is checked before opening (opening some devices acts), the file is opened non-blocking,
    and checked again on the open descriptor (it may have been swapped in between).

    Raises:
        OSError: If it is missing, not a regular file, or outside ``root``.
    """
    if root is not None and not inside(path, root):
        raise OSError(f"{path} leads outside {root}")
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(f"{path} is not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(path: Path, root: Path | None = None, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of regular file ``path`` (see :func:`open_regular`).

    Raises:
        OSError: As :func:`open_regular`, or if the file holds more than ``limit`` bytes.
    """
    with open_regular(path, root) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"{path} is over {limit} bytes")
    return data


def loads_bounded(data: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses arrays and objects nested deeper than ``max_depth``
    (snrl's one rule for JSON from outside: :func:`snrl.io.load_json`).

    Raises:
        ValueError: Not JSON, not UTF-8, or nested too deeply.
    """
    return load_json(data, what="JSON", max_depth=max_depth)


def _num(cell: str) -> float | None:
    """A metrics cell as a JSON number (NaN, empty and text: None)."""
    try:
        v = float(cell)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def parse_rows(text: str, n_cols: int) -> list[list[float | None]]:
    """The complete rows of metrics.csv text (header excluded; every line ends in a newline).

    metrics.csv holds numbers only (snrl.training.metrics writes them unquoted), so a line is
    split on commas; a line with the wrong number of fields (torn) is skipped.
    """
    rows = []
    for line in text.split("\n"):
        if not line or len(line) > MAX_LINE:
            continue
        cells = line.split(",")
        if len(cells) != n_cols:
            continue
        rows.append([_num(c) for c in cells])
    return rows


def metrics_rows(
    path: Path, offset: int = 0, root: Path | None = None
) -> tuple[list[str], list[list[float | None]], int]:
    """Header, complete rows from byte ``offset`` on (0: from the first row), and the byte
    offset after the last complete line (where the next read starts).

    At most :data:`MAX_METRICS_READ` bytes are read: when more follow ``offset``, the rows
    are those of the file's last bytes (its newest rows).

    Raises:
        OSError: If the file cannot be read or is not a regular file (:func:`open_regular`).
    """
    header, text, end, _ = _read_new(path, offset, root)
    return header, parse_rows(text, len(header)) if text else [], end


def _read_new(
    path: Path, offset: int, root: Path | None = None
) -> tuple[list[str], str, int, bool]:
    """Header, the text of the complete lines from byte ``offset`` on, the offset after them
    (a torn last line, without its newline, is left for the next look), and whether lines
    were skipped to stay within :data:`MAX_METRICS_READ` (then the text starts at the first
    whole line of the file's last bytes).

    Raises:
        OSError: As :func:`open_regular`.
    """
    with open_regular(path, root) as f:
        header_line = f.readline(MAX_LINE + 1)
        if not header_line.endswith(b"\n"):  # torn, or no header line at all
            return [], "", 0, False
        size = os.fstat(f.fileno()).st_size
        start = max(offset, len(header_line))
        skipped = size - start > MAX_METRICS_READ
        if skipped:
            start = size - MAX_METRICS_READ
        f.seek(start)
        data = f.read(MAX_METRICS_READ)
    if skipped:  # start at the first whole line
        first = data.find(b"\n")
        if first < 0:
            return [], "", start + len(data), True
        data, start = data[first + 1 :], start + first + 1
    header = header_line.decode("utf-8", "replace").strip().split(",")
    cut = data.rfind(b"\n")
    if cut < 0:
        return header, "", start, skipped
    return header, data[: cut + 1].decode("utf-8", "replace"), start + cut + 1, skipped


@dataclass
class _Metrics:
    """The incremental summary of one metrics.csv."""

    key: tuple[int, int] = (0, 0)  # (mtime_ns, size) last read
    offset: int = 0
    header: list[str] = field(default_factory=list)
    rows: int = 0
    last_step: float | None = None
    last_return: float | None = None
    best_eval: float | None = None
    problem: str | None = None  # why the file cannot be read, or why only its tail was

    def update(self, path: Path, root: Path | None = None) -> None:
        try:
            st = path.stat()
        except OSError:
            self.__init__()  # type: ignore[misc]
            return
        key = (st.st_mtime_ns, st.st_size)
        if key == self.key:
            return
        if st.st_size < self.offset:  # rewritten (a resume drops rows past its checkpoint)
            self.__init__()  # type: ignore[misc]
        try:
            header, text, offset, skipped = _read_new(path, self.offset, root)
            if self.header and header != self.header:  # a new run replaced the file
                self.__init__()  # type: ignore[misc]
                header, text, offset, skipped = _read_new(path, 0, root)
        except OSError as e:
            self.__init__()  # type: ignore[misc]
            self.problem = f"metrics.csv not read: {e.strerror or e}"
            return
        self.key, self.header, self.offset = key, header, offset
        self.problem = None
        if skipped:
            self.problem = (
                f"metrics.csv grew by more than {MAX_METRICS_READ} bytes at once: the rows "
                "counted are those of its last part"
            )
        if not text:
            return
        # only what the list shows is parsed (the run view's event stream sends whole rows):
        # the first look at 1,000 runs reads every metrics.csv once, so the rows are counted
        # and only the evaluation column is cut out of each line (a split that stops there;
        # 4x faster than a regular expression, measured)
        self.rows += text.count("\n")
        col = {name: i for i, name in enumerate(header)}
        if "eval_return_mean" in col:
            i = col["eval_return_mean"]
            cells = [ln.split(",", i + 1)[i] for ln in text.split("\n") if ln.count(",") >= i]
            for cell in cells:
                if cell and cell != "nan":
                    v = _num(cell)
                    if v is not None and (self.best_eval is None or v > self.best_eval):
                        self.best_eval = v
        last = text[text.rfind("\n", 0, len(text) - 1) + 1 :].rstrip("\n").split(",")
        if len(last) == len(header):
            if "env_step" in col:
                self.last_step = _num(last[col["env_step"]])
            if "episode_return_mean" in col:
                self.last_return = _num(last[col["episode_return_mean"]])


@dataclass
class _Entry:
    config_key: tuple[int, int] = (0, 0)
    config: dict[str, Any] = field(default_factory=dict)
    config_problem: str | None = None
    metrics: _Metrics = field(default_factory=_Metrics)


def _stat_key(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _json_file(path: Path, root: Path | None = None) -> tuple[Any, str | None]:
    """``(data, None)``; ``(None, None)`` when the file is missing; ``(None, why)`` when it
    cannot be read (not a regular file, over :data:`MAX_JSON_BYTES`, not JSON, nested deeper
    than :data:`MAX_JSON_DEPTH`)."""
    try:
        data = read_capped(path, root)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"{path.name} not read: {e.strerror or e}"
    try:
        return loads_bounded(data), None
    except ValueError as e:  # UnicodeDecodeError included
        return None, f"{path.name} not read: {describe(e)}"


def _read_json(path: Path, root: Path | None = None) -> Any:
    return _json_file(path, root)[0]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_tail(path: Path, root: Path | None = None, limit: int = 16384) -> str:
    """The last ``limit`` bytes of the regular file ``path`` (:func:`open_regular`), as text.

    Raises:
        OSError: As :func:`open_regular`.
    """
    with open_regular(path, root) as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read(limit).decode("utf-8", "replace")


def last_error_line(log: Path, limit: int = 16384, root: Path | None = None) -> str | None:
    """The last ``error: ...`` line of a launch log (its last ``limit`` bytes), or None."""
    try:
        tail = read_tail(log, root, limit)
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        if line.startswith("error: "):
            return line
    return None


def folder_kind(path: Path) -> str | None:
    """``"comparison"``, ``"run"`` or None: what a directory is to the dashboard."""
    if (path / COMPARE_MANIFEST).is_file():
        return "comparison"
    if (path / MANIFEST).is_file() or (path / "config.json").is_file():
        return "run"
    return None


def found_instead(root: Path, limit: int = 5) -> str:
    """What a folder with no run holds, in one line: why the dashboard shows nothing there.

    Names the first ``limit`` folders (none holds ``config.json`` or a run manifest, at
    depth 1 and 2) and files at its top."""
    try:
        entries = sorted(
            (e for e in os.scandir(root) if not e.name.startswith(".")), key=lambda e: e.name
        )
    except OSError as e:
        return f"{root} cannot be read ({describe(e)})"
    folders = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    files = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]

    def some(names: list[str]) -> str:
        shown = ", ".join(names[:limit])
        return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")

    what = "a run is a folder holding config.json (what snrl train --out DIR writes)"
    if not folders and not files:
        return f"no run in {root}: it is empty ({what})"
    parts = []
    if folders:
        parts.append(f"{len(folders)} folder(s) without a run inside: {some(folders)}")
    if files:
        parts.append(f"{len(files)} file(s): {some(files)}")
    return f"no run in {root}: {what}, at depth 1 or 2; found {'; '.join(parts)}"


def tuned_note(config: Any) -> str:
    """Which tuned entry (snrl/zoo) a run's config applied, in one line: its ``tuned_from``,
    else what it would have been (a run from before snrl recorded a missing entry)."""
    if not isinstance(config, dict):
        return ""
    record = config.get("tuned_from")
    if isinstance(record, str) and record:
        return record
    if config.get("tuned") is False:
        return "off (tuned = false: the built-in defaults and your values)"
    algo, env, backbone = config.get("algo"), config.get("env"), config.get("backbone")
    if not all(isinstance(v, str) for v in (algo, env, backbone)):
        return "not recorded"
    from snrl.zoo import ALGOS, lookup, no_entry_note

    if algo not in ALGOS:
        return "not recorded"
    if lookup(algo, env, backbone) is None:
        return no_entry_note(algo, env, backbone)
    return "not recorded (tuned_from is empty: a config object, or every key given)"


class RunIndex:
    """The runs and comparisons under ``root``, summarized and cached.

    Args:
        root: RUNS_DIR (resolved).
        alive: ``run_id -> bool | None``: whether this dashboard's process for the run is alive
            (None: not launched here).
    """

    def __init__(self, root: Path, alive=None, only: str | None = None):
        self.root = root
        self.alive = alive or (lambda run_id: None)
        self.only = only  # one run directory shown (snrl dashboard RUN_DIR), else None
        self._cache: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ discovery
    def _kind(self, path: Path) -> str | None:
        return folder_kind(path)

    def scan(self) -> tuple[list[str], list[str]]:
        """Run ids and comparison ids (paths relative to root, with ``/``), depth 1 and 2
        (the one run when :attr:`only` is set)."""
        if self.only is not None:
            return [self.only], []
        runs: list[str] = []
        comparisons: list[str] = []

        def visit(directory: Path, prefix: str, depth: int) -> None:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                return
            for e in entries:
                if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                    continue
                path = Path(e.path)
                kind = self._kind(path)
                rid = prefix + e.name
                if kind == "run":
                    runs.append(rid)
                elif kind == "comparison":
                    comparisons.append(rid)
                elif depth < 2:
                    visit(path, rid + "/", depth + 1)

        visit(self.root, "", 1)
        return sorted(runs), sorted(comparisons)

    # ------------------------------------------------------------------ one run
    def _entry(self, run_id: str) -> _Entry:
        with self._lock:
            entry = self._cache.setdefault(run_id, _Entry())
        d = self.root / run_id
        key = _stat_key(d / "config.json")
        if key != entry.config_key:
            data, problem = _json_file(d / "config.json", self.root)
            if data is not None and not isinstance(data, dict):
                problem = "config.json not read: not a JSON object"
            entry.config = data if isinstance(data, dict) else {}
            entry.config_key, entry.config_problem = key, problem
        entry.metrics.update(d / "metrics.csv", self.root)
        return entry

    def launch_record(self, run_id: str) -> dict[str, Any] | None:
        """This dashboard's record of launching ``run_id`` (in :data:`LAUNCH_DIR`), or None.

        Its fields are checked, as any file's: a ``config`` that is not an object, an
        ``algo`` that is not text, a ``log`` that is not a log's file name are left out."""
        if not NAME_RE.match(run_id):
            return None
        data = _read_json(self.root / LAUNCH_DIR / f"{run_id}.json", self.root)
        if not isinstance(data, dict):
            return None
        if not isinstance(data.get("config"), dict):
            data.pop("config", None)
        if not isinstance(data.get("algo"), str):
            data.pop("algo", None)
        if not isinstance(data.get("log"), str) or not _LOG_NAME_RE.match(data["log"]):
            data.pop("log", None)
        return data

    def summary(
        self, run_id: str, now: float | None = None, launched: set[str] | None = None
    ) -> dict[str, Any]:
        """One row of the run list: what the files (and this dashboard's launches) say."""
        now = time.time() if now is None else now
        d = self.root / run_id
        entry = self._entry(run_id)
        cfg, m = entry.config, entry.metrics
        alive = self.alive(run_id)  # first: it reaps an ended process, recording its exit
        maybe = launched is None or run_id in launched  # launched: the records that exist
        launch = self.launch_record(run_id) if maybe else None
        if not cfg and launch:  # launched, config.json not written yet
            cfg = {"algo": launch.get("algo"), **launch.get("config", {})}
        total = cfg.get("total_steps")
        steps = m.last_step or 0
        status, reason = self._status(alive, d, launch, steps, total, m, now)
        problems = [p for p in (entry.config_problem, m.problem) if p]
        return {
            "id": run_id,
            "algo": cfg.get("algo"),
            "env": cfg.get("env"),
            "backbone": cfg.get("backbone"),
            "hidden_size": cfg.get("hidden_size"),
            "dale": cfg.get("force_dale_law"),
            "seed": cfg.get("seed"),
            "steps": int(steps),
            "total_steps": total,
            "rows": m.rows,
            "last_return": m.last_return,
            "best_eval": m.best_eval,
            "status": status,
            "reason": reason,
            "mtime": entry.metrics.key[0] / 1e9 if entry.metrics.key[0] else None,
            "problem": "; ".join(problems) or None,
        }

    def _status(self, alive, d, launch, steps, total, m, now) -> tuple[str, str | None]:
        if alive:
            return "running", None
        done = isinstance(total, (int, float)) and steps >= total
        if done:
            return "finished", None
        if launch and launch.get("log"):
            err = last_error_line(self.root / LAUNCH_DIR / launch["log"], root=self.root)
            if err and "interrupted by" not in err:
                return "failed", err
        # not a process of this dashboard (or one of an earlier dashboard whose end was not
        # seen): running while its metrics.csv is fresh
        ended = launch is not None and "returncode" in launch
        if not alive and not ended and m.key[0] and now - m.key[0] / 1e9 < RUNNING_WINDOW_S:
            return "running", "metrics.csv written recently (not started by this dashboard)"
        if (d / "checkpoints" / "last.pt").is_file():
            return "killed-resumable", f"resume: snrl train --out {d} --resume"
        return "failed", "stopped before its first checkpoint (nothing to resume)"

    def list_runs(self) -> list[dict[str, Any]]:
        runs, _ = self.scan()
        now = time.time()
        try:
            names = os.listdir(self.root / LAUNCH_DIR)
        except OSError:
            names = []
        launched = {n[:-5] for n in names if n.endswith(".json") and NAME_RE.match(n[:-5])}
        out = [self.safe_summary(r, now, launched) for r in runs]
        # launched runs without a directory: starting, or failed before writing anything
        for name in sorted(launched - set(runs)) if self.only is None else ():
            if self.launch_record(name) is not None:
                out.append(self.safe_summary(name, now, launched))
            else:
                why = f"its launch record {LAUNCH_DIR}/{name}.json cannot be read"
                out.append({"id": name, "status": "failed", "reason": why, "problem": why})
        return out

    def safe_summary(self, run_id: str, now: float, launched: set[str] | None) -> dict[str, Any]:
        """:meth:`summary`, or, when the run's files break it, a row that says so: one
        crafted run folder never takes the list down with it."""
        try:
            return self.summary(run_id, now, launched)
        except (OSError, ValueError, TypeError, KeyError, RecursionError) as e:
            reason = f"cannot read this run: {describe(e)}"
            return {"id": run_id, "status": "failed", "reason": reason, "problem": reason}

    def detail(self, run_id: str) -> dict[str, Any]:
        """Everything the run view shows, except the metrics rows (the event stream sends
        them): config, files (videos, figures), analysis summary, launch log."""
        d = self.root / run_id
        info = self.safe_summary(run_id, time.time(), None)
        launch = self.launch_record(run_id)
        info["config"] = self._entry(run_id).config or (launch or {}).get("config", {})
        files = []
        try:
            names = sorted(os.listdir(d))
        except OSError:
            names = []
        for name in names:
            if name.startswith("."):
                continue
            low = name.lower()
            if low.endswith(VIDEO_EXTS):
                files.append({"kind": "video", "path": f"{run_id}/{name}"})
            elif low.endswith(".png"):
                files.append({"kind": "figure", "path": f"{run_id}/{name}"})
        analysis = d / ANALYSIS_DIR
        info["analysis"] = None
        if analysis.is_dir():
            try:
                names = sorted(os.listdir(analysis))
            except OSError:
                names = []
            for name in names:
                if name.lower().endswith(".png") and not name.startswith("."):
                    files.append({"kind": "analysis", "path": f"{run_id}/{ANALYSIS_DIR}/{name}"})
            summary = _read_json(analysis / "summary.json", self.root)
            if summary is not None:
                info["analysis"] = summary
        info["files"] = files
        info["launched"] = bool(launch)
        info["tuned"] = tuned_note(info["config"])
        return info

    # ------------------------------------------------------------------ comparisons
    def comparison(self, comp_id: str) -> dict[str, Any]:
        """A comparison directory: its request, runs (status files), curves by group (mean
        and 95% bootstrap band, as ``snrl compare`` draws them), the few-seeds warning of
        ``report.md`` when a group has fewer than 3 seeds with data, summary table, report."""
        from snrl.experiments.report import MIN_SEEDS, aggregate_curves, few_seeds_warning

        d = self.root / comp_id
        manifest = _read_json(d / COMPARE_MANIFEST, self.root)
        runs = []
        for path in sorted((d / "status").glob("*.json")):
            rec = _read_json(path, self.root)
            rec = rec if isinstance(rec, dict) else {}
            runs.append(
                {
                    "name": _text(rec.get("name")) or path.stem,
                    "group": _text(rec.get("group")) or path.stem,
                    "seed": rec.get("seed"),
                    "status": _text(rec.get("status")),
                    "error": _text(rec.get("error")),
                }
            )
        groups: dict[str, list] = {}
        run_dirs = sorted((d / "runs").glob("*")) if (d / "runs").is_dir() else []
        by_name = {r["name"]: r for r in runs}
        for rd in run_dirs:
            if rd.name.startswith(".") or not rd.is_dir():
                continue
            cfg = _read_json(rd / "config.json", self.root)
            cfg = cfg if isinstance(cfg, dict) else {}
            group = by_name.get(rd.name, {}).get("group") or _text(cfg.get("backbone")) or rd.name
            curve = self._curve(rd / "metrics.csv")
            if curve is not None:
                groups.setdefault(group, []).append(curve)
            if rd.name not in by_name:
                runs.append(
                    {"name": rd.name, "group": group, "seed": cfg.get("seed"), "status": "running"}
                )

        def clean(a) -> list:
            return [float(v) if math.isfinite(v) else None for v in a]

        curves = {}
        for group, cs in groups.items():
            agg = aggregate_curves(cs, n_points=100)
            curves[group] = {k: clean(agg[k]) for k in ("steps", "mean", "low", "high")}
            curves[group]["n_seeds"] = len(cs)
        # the warning report.md and curves.png carry: bands over 2 seeds mean little
        fewest = min((len(cs) for cs in groups.values()), default=0)
        warning = few_seeds_warning(fewest) if 0 < fewest < MIN_SEEDS else None
        table = None
        try:
            import csv

            text = read_capped(d / "summary.csv", self.root).decode("utf-8", "replace")
            table = list(csv.reader(text.splitlines()))
        except (OSError, csv.Error):
            pass
        report = None
        try:
            report = read_capped(d / "report.md", self.root).decode("utf-8", "replace")
        except OSError:
            pass
        figures = [f"{comp_id}/{n}" for n in ("curves.png",) if (d / n).is_file()]
        return {
            "id": comp_id,
            "request": manifest if isinstance(manifest, dict) else {},
            "runs": runs,
            "curves": curves,
            "warning": warning,
            "summary": table,
            "report": report,
            "figures": figures,
        }

    def _curve(self, path: Path) -> tuple[Any, Any] | None:
        """(env steps, episode return means) of a metrics.csv (its last
        :data:`MAX_METRICS_READ` bytes at most), or None."""
        import numpy as np

        try:
            header, rows, _ = metrics_rows(path, 0, self.root)
        except OSError:
            return None
        if "env_step" not in header or "episode_return_mean" not in header or not rows:
            return None
        i, j = header.index("env_step"), header.index("episode_return_mean")
        pairs = [(r[i], r[j]) for r in rows if r[i] is not None]
        if not pairs:
            return None
        steps = np.array([p[0] for p in pairs], dtype=np.float64)
        returns = np.array([np.nan if p[1] is None else p[1] for p in pairs], dtype=np.float64)
        return steps, returns

"""The run directory: what snrl may create, reuse, replace or delete in it.

Layout (see DESIGN.md): ``config.json``, ``metrics.csv``, ``checkpoints/best.pt``,
``checkpoints/last.pt``, ``learning_curve.png`` (``snrl demo`` adds ``eval.json``,
``demo.mp4``, ``demo.gif``; ``snrl analyze`` adds ``analysis/``, :data:`ANALYSIS_FILES`).

A directory is an snrl run directory when it holds the manifest :data:`MANIFEST`
(``.snrl-run.json``): the list of the files and directories snrl itself created there. A
name is added to the manifest (atomically) *before* its file is first written, so after a
crash the manifest lists every file of ours that may exist. Replacing a run (``--force``,
``snrl demo`` over its own output, ``overwrite=True`` in Python) deletes only the entries the
manifest lists -- a listed directory only when it is empty -- and never anything else; it is
refused for the current directory, a parent of it, the home directory and ``/``. A
non-empty directory without a manifest is never written into (except ``--resume`` of a run
written before manifests existed, recognized by its ``checkpoints/last.pt``).

Stale temp files that a killed process left (``.<name>.XXXXXXXX.tmp`` from
:mod:`snrl.io`, ``.<stem>.XXXXXXXX.tmp.<ext>`` from the video writers) are removed when a
run directory is opened (:func:`remove_stale_temps`).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from snrl.errors import UserError
from snrl.io import write_json_atomic

__all__ = [
    "ANALYSIS_DIR",
    "ANALYSIS_FILES",
    "ANALYSIS_OUTPUTS",
    "ACTIVITY_DIR",
    "ACTIVITY_FILE_RE",
    "CALLBACK_FILES",
    "DEMO_FILES",
    "EVAL_FILES",
    "LAYOUT",
    "RUN_OUTPUTS",
    "MANIFEST",
    "claim_files",
    "continue_run_dir",
    "is_run_dir",
    "prepare_run_dir",
    "read_manifest",
    "remove_stale_temps",
    "write_json_atomic",
]

#: The manifest file that marks a run directory and lists what snrl wrote there.
MANIFEST = ".snrl-run.json"
_FORMAT = "snrl-run"
_VERSION = 1

#: What every training run writes (directories end in ``/``), claimed when the run starts.
LAYOUT = (
    "checkpoints/",
    "config.json",
    "metrics.csv",
    "learning_curve.png",
    "checkpoints/best.pt",
    "checkpoints/last.pt",
)

#: The files ``snrl demo`` adds to a run directory (claimed before they are written).
DEMO_FILES = ("eval.json", "demo.mp4", "demo.gif")
#: What ``snrl eval`` writes into a run directory (the psychometric curve of a decision task).
EVAL_FILES = ("psychometric.png",)

#: The files ``snrl analyze`` writes into its output folder (default ``analysis/``; the
#: folder's own marker first): a rerun replaces these names only, and only those it wrote.
ANALYSIS_FILES = (
    ".snrl-analysis.json",
    "summary.json",
    "raster.png",
    "rates_cv.png",
    "ei_currents.png",
    "tuning.png",
    "psth.png",
    "psth_decision.png",
    "pca.png",
    "raster.svg",
    "rates_cv.svg",
    "ei_currents.svg",
    "tuning.svg",
    "psth.svg",
    "psth_decision.svg",
    "pca.svg",
    "compare.json",
    "compare.png",
    "spikes.nwb",
    "spikes_neo.mat",
)

#: ``snrl analyze``'s default output folder in a run directory, and its files.
ANALYSIS_DIR = "analysis"
ANALYSIS_OUTPUTS = (f"{ANALYSIS_DIR}/", *(f"{ANALYSIS_DIR}/{n}" for n in ANALYSIS_FILES))

#: What ``snrl train --callback`` adds: the callbacks it ran, by name (``module:Name``).
CALLBACK_FILES = ("callbacks.json",)
#: The folder of :class:`snrl.callbacks.RecordActivity`'s trajectories, and their names
#: (``activity/update_000010_episode_0.npz``: recorded after update 10, its first episode).
ACTIVITY_DIR = "activity"
ACTIVITY_FILE_RE = re.compile(r"^activity/update_\d{6,}_episode_\d+\.npz$")

#: Every name snrl ever writes into a run directory: the only names a manifest may list
#: (with the recordings that :data:`ACTIVITY_FILE_RE` matches), so a crafted manifest in a
#: folder someone sent cannot make ``--force`` delete anything else.
RUN_OUTPUTS = (
    *LAYOUT,
    *DEMO_FILES,
    *EVAL_FILES,
    *ANALYSIS_OUTPUTS,
    *CALLBACK_FILES,
    f"{ACTIVITY_DIR}/",
)

# Temp names of our own writers: tempfile.mkstemp's 8 random characters between a prefix
# ".<name>." and the suffix ".tmp" (snrl.io) or ".tmp.<ext>" (video writers), and the
# write probe of _check_writable.
_TEMP_RE = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp(\.(gif|mp4))?$|^\.snrl-write-test\.[a-z0-9_]{8}$")


def _check_path_arg(out: str | os.PathLike) -> Path:
    if not isinstance(out, (str, os.PathLike)):
        raise UserError(f"run directory must be a path, got {type(out).__name__} (pass a str)")
    raw = os.fspath(out)
    if not isinstance(raw, str) or not raw.strip():
        raise UserError(
            f"run directory path {raw!r} is empty (pass a directory name, e.g. --out runs/lif)"
        )
    return Path(raw)


def _describe(entries: Iterable[Path], limit: int = 6) -> str:
    names = sorted(e.name + ("/" if e.is_dir() and not e.is_symlink() else "") for e in entries)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _check_entry(entry: object, manifest: Path) -> str:
    ok = isinstance(entry, str) and entry not in ("", "/")
    if ok:
        p = PurePosixPath(entry.rstrip("/"))
        ok = (
            not p.is_absolute()
            and bool(p.parts)
            and "\\" not in entry
            and all(part not in ("", ".", "..") for part in p.parts)
            and str(p) != MANIFEST
        )
    if not ok:
        raise UserError(
            f"run manifest {manifest} is corrupt (entry {entry!r} is not a relative path inside "
            "the run directory; remove the run's files by hand or choose another directory)"
        )
    if entry not in RUN_OUTPUTS and not ACTIVITY_FILE_RE.match(entry):
        raise UserError(
            f"run manifest {manifest} lists {entry!r}, which snrl never writes (it was not "
            "written by snrl; remove the run's files by hand or choose another directory)"
        )
    return entry  # type: ignore[return-value]


def read_manifest(run_dir: str | os.PathLike) -> list[str] | None:
    """The entries of ``run_dir``'s manifest (directories end in ``/``), or None without one.

    Raises:
        UserError: If the manifest is unreadable, not snrl's, or lists a path that leaves
            the directory.
    """
    path = Path(run_dir) / MANIFEST
    if not path.is_file() and not path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(
            f"run manifest {path} is corrupt ({type(e).__name__}; remove the run's files by "
            "hand or choose another directory)"
        ) from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(entries, list):
        raise UserError(
            f"run manifest {path} is corrupt (not an snrl run manifest; remove the run's files "
            "by hand or choose another directory)"
        )
    return [_check_entry(e, path) for e in entries]


def _write_manifest(run_dir: Path, entries: Iterable[str]) -> None:
    unique = list(dict.fromkeys(entries))
    write_json_atomic(
        run_dir / MANIFEST, {"format": _FORMAT, "version": _VERSION, "entries": unique}
    )


def is_run_dir(path: str | os.PathLike) -> bool:
    """True when ``path`` is a directory holding an snrl run manifest."""
    p = Path(path)
    return p.is_dir() and (p / MANIFEST).is_file()


def claim_files(run_dir: str | os.PathLike, names: Iterable[str]) -> None:
    """Record ``names`` (relative paths; directories end in ``/``) in the manifest of
    ``run_dir`` before snrl writes them, so that a later ``--force`` may delete them.

    Raises:
        UserError: If ``run_dir`` is not a run directory, or a name exists there already
            without being snrl's (it would be overwritten).
    """
    run_dir = Path(run_dir)
    entries = read_manifest(run_dir)
    if entries is None:
        raise UserError(
            f"{run_dir} is not an snrl run directory (it has no {MANIFEST}; write into a "
            "directory created by snrl)"
        )
    new = [_check_entry(n, run_dir / MANIFEST) for n in names if n not in entries]
    foreign = [n for n in new if (run_dir / n.rstrip("/")).exists() and not n.endswith("/")]
    if foreign:
        raise UserError(
            f"{run_dir} holds {', '.join(foreign)}, which snrl did not write and will not "
            "overwrite (move it away or choose another directory)"
        )
    if new:
        _write_manifest(run_dir, [*entries, *new])


def remove_stale_temps(directory: str | os.PathLike, *, min_age_s: float = 0.0) -> list[Path]:
    """Delete the temp files a killed snrl process left in ``directory`` (not recursive).

    Only names of snrl's own writers are touched: ``.<name>.XXXXXXXX.tmp`` (atomic writes),
    ``.<stem>.XXXXXXXX.tmp.gif|mp4`` (videos) and ``.snrl-write-test.XXXXXXXX``; only plain
    files, not links or directories.

    Args:
        directory: The directory to clean (missing: nothing to do).
        min_age_s: Keep temps modified less than this many seconds ago (a concurrent writer
            may still own them).

    Returns:
        The removed paths.
    """
    d = Path(directory)
    removed: list[Path] = []
    try:
        entries = list(d.iterdir())
    except OSError:
        return removed
    now = time.time()
    for p in entries:
        if not _TEMP_RE.match(p.name) or p.is_symlink() or not p.is_file():
            continue
        try:
            if now - p.stat().st_mtime < min_age_s:
                continue
            p.unlink()
        except OSError:
            continue
        removed.append(p)
    return removed


def _clean_temps(run_dir: Path) -> None:
    remove_stale_temps(run_dir)
    remove_stale_temps(run_dir / "checkpoints")


def _check_writable(out: Path) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=".snrl-write-test.", dir=out)
    except OSError as e:
        raise UserError(
            f"run directory {out} is not writable ({e.strerror or e}; choose another --out)"
        ) from e
    os.close(fd)
    os.unlink(tmp)


def _protected(path: Path) -> str | None:
    """Why snrl must never clear ``path``, or None."""
    r = path.resolve()
    cwd = Path.cwd().resolve()
    if r == Path(r.anchor):
        return "the root directory"
    try:
        if r == Path.home().resolve():
            return "your home directory"
    except RuntimeError:  # no home directory
        pass
    if r == cwd:
        return "the current directory"
    if r in cwd.parents:
        return "a parent of the current directory"
    return None


def _contents(out: Path) -> tuple[list[str] | None, list[Path], bool]:
    """(manifest entries or None, entries that are not snrl's, whether any file of ours
    exists)."""
    entries = read_manifest(out)
    listed = set(entries or ())
    tops = {e.rstrip("/").split("/")[0] for e in listed}
    foreign = [
        p
        for p in out.iterdir()
        if p.name != MANIFEST and p.name not in tops and not _TEMP_RE.match(p.name)
    ]
    ours = any(
        not e.endswith("/") and ((out / e).is_file() or (out / e).is_symlink()) for e in listed
    )
    return entries, foreign, ours


def _remove_listed(out: Path, entries: list[str]) -> None:
    why = _protected(out)
    if why is not None:
        raise UserError(
            f"refusing to clear the run in {out}: it is {why} (choose another directory, or "
            f"delete the files listed in {out / MANIFEST} by hand)"
        )
    files = [e for e in entries if not e.endswith("/")]
    dirs = sorted((e for e in entries if e.endswith("/")), key=lambda e: -e.count("/"))
    root = out.resolve()

    def inside(p: Path) -> bool:  # no symlinked directory on the way out of the run
        return p.parent.resolve() == root.joinpath(*p.relative_to(out).parts[:-1])

    try:
        for e in files:
            p = out / e
            if (p.is_symlink() or p.is_file()) and inside(p):
                p.unlink()  # a link itself, never its target
        for e in dirs:
            p = out / e.rstrip("/")
            if p.is_dir() and not p.is_symlink() and inside(p) and not any(p.iterdir()):
                p.rmdir()
    except OSError as err:
        raise UserError(
            f"cannot clear run directory {out}: {err.strerror or err} (remove its files by hand "
            "or choose another directory)"
        ) from err


def _create(out: Path, entries: Iterable[str]) -> Path:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(
            f"cannot create run directory {out} ({e.strerror or e}; choose another --out)"
        ) from e
    _check_writable(out)
    existing = read_manifest(out) or []
    _write_manifest(out, [*existing, *entries])  # claimed before anything is written
    try:
        (out / "checkpoints").mkdir(exist_ok=True)
    except OSError as e:
        raise UserError(
            f"cannot create {out / 'checkpoints'} ({e.strerror or e}; choose another --out)"
        ) from e
    _clean_temps(out)
    return out


def _refuse_foreign(out: Path, foreign: list[Path], hint: str) -> None:
    raise UserError(
        f"{out} is not empty and is not an snrl run directory (it holds {_describe(foreign)}; "
        f"snrl writes only into new or empty directories and its own runs: {hint})"
    )


def prepare_run_dir(out: str | os.PathLike, *, resume: bool = False, force: bool = False) -> Path:
    """Create, reuse or replace the run directory ``out`` for a training run.

    Rules:
        * both ``resume`` and ``force`` -> UserError;
        * ``resume``: ``out/checkpoints/last.pt`` must exist; nothing is deleted;
        * a new or empty directory (or a run that has written no file yet) is used as is;
        * ``force`` on an snrl run: the files its manifest lists are deleted, nothing else
          (refused for the current directory, its parents, the home directory and ``/``);
        * an existing run without ``force`` or ``resume`` -> UserError;
        * any other non-empty directory -> UserError naming what is there.

    Returns:
        ``out`` as a :class:`Path`, with ``checkpoints/`` and a manifest claiming
        :data:`LAYOUT`.

    Raises:
        UserError: For the cases above, when ``out`` is a file, or is not writable.
    """
    if resume and force:
        raise UserError("--resume and --force are mutually exclusive (pass at most one)")
    out = _check_path_arg(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"run directory {out} exists and is not a directory (choose another --out)")
    if resume:
        last = out / "checkpoints" / "last.pt"
        if not last.is_file():
            raise UserError(
                f"cannot resume: {last} does not exist, so there is nothing to resume (start a "
                "new run without --resume, with --force to replace a partial one)"
            )
        return continue_run_dir(out)
    if not out.is_dir():
        return _create(out, LAYOUT)
    entries, foreign, ours = _contents(out)
    if entries is None:
        if foreign:
            _refuse_foreign(out, foreign, "choose another --out")
        return _create(out, LAYOUT)
    if ours and not force:
        raise UserError(
            f"run directory {out} holds an earlier run (continue it with --resume, or in "
            "Python load(.../checkpoints/last.pt, run_dir=...); replace it with --force, or "
            "overwrite=True)"
        )
    if ours:
        _remove_listed(out, entries)
    clash = [n for n in LAYOUT if not n.endswith("/") and (out / n).exists()]
    if clash:
        raise UserError(
            f"{out} holds {', '.join(clash)}, which snrl did not write and will not overwrite "
            "(move it away or choose another --out)"
        )
    _write_manifest(out, LAYOUT)
    return _create(out, ())


def continue_run_dir(out: str | os.PathLike) -> Path:
    """Open ``out`` to continue a run into it: an snrl run (kept as it is), a new or empty
    directory (created), or a run written before manifests existed (one with
    ``checkpoints/last.pt``, adopted). Nothing is deleted except stale temp files.

    Raises:
        UserError: If ``out`` is a file, not writable, a non-empty directory that is not
            an snrl run, or holds one of snrl's names as a symbolic link.
    """
    out = _check_path_arg(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"run directory {out} exists and is not a directory (choose another --out)")
    if not out.is_dir():
        return _create(out, LAYOUT)
    links = [n.rstrip("/") for n in RUN_OUTPUTS if (out / n.rstrip("/")).is_symlink()]
    if links:  # a crafted bundle: continuing would write through the link, out of the run
        raise UserError(
            f"run directory {out} holds symbolic links ({', '.join(links)}); snrl writes its "
            "runs' files itself and will not write through a link (remove the links, or "
            "choose another run directory)"
        )
    entries, foreign, _ = _contents(out)
    if entries is None and foreign and not (out / "checkpoints" / "last.pt").is_file():
        _refuse_foreign(out, foreign, "choose another run directory")
    if entries is not None and all(e in entries for e in LAYOUT):
        _check_writable(out)
        _clean_temps(out)
        return out
    return _create(out, LAYOUT)

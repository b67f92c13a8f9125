"""The run directory: what snrl may create, reuse, replace or delete in it.

Layout (see DESIGN.md): ``config.json``, ``metrics.csv``, ``checkpoints/best.pt``,
``checkpoints/last.pt``, ``learning_curve.png`` (``snrl demo`` adds ``eval.json``,
``demo.mp4``, ``demo.gif``; ``snrl analyze`` adds ``analysis/``, :data:`ANALYSIS_FILES`).

A directory is an snrl run directory when it holds the manifest :data:`MANIFEST`
(``.snrl-run.json``): the list of the files and directories snrl itself created there. A
name is added to the manifest (atomically) *before* its file is first written, so after a
crash the manifest lists every file of ours that may exist. A non-empty directory without a
manifest is never written into (except ``--resume`` of a run written before manifests
existed, recognized by its ``checkpoints/last.pt``).

What snrl deletes. Replacing a run (``--force``, ``snrl demo`` over its own output,
``overwrite=True`` in Python) deletes only the entries the manifest lists -- a listed
directory only when it is empty -- and never anything else, and only when the manifest is
*bound* to the directory: snrl records the directory's resolved path, device and inode in
the manifest when it writes a fresh one, and deletes nothing when they differ from the
directory's now (a manifest planted in or copied into a folder, a run moved or copied
elsewhere, a manifest written by snrl 0.1, which recorded none). Replacing is also refused
when ``--out`` is itself a symbolic link, and for the current directory, a parent of it, the
home directory and ``/``. Stale temp files are removed only when their name proves that
snrl made them (:func:`snrl.io.is_own_temp`), never by their look.

One run at a time. Everything that writes a run holds the lock :data:`LOCK`
(``.snrl-run.lock``, an ``flock`` on a file of ours, see :func:`snrl.io.hold_lock`) for its
whole life: :func:`prepare_run_dir`, :func:`continue_run_dir` and the run log of
``learn`` take it, ``snrl train`` (``--resume`` too) holds it from start to end; a second
process is refused with a message naming the holder (pid, host, start time). The lock file
stays in the directory (it is never deleted by ``--force``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from snrl.errors import UserError
from snrl.io import (
    binding_mismatch,
    dir_binding,
    hold_lock,
    is_own_temp,
    load_json,
    make_dirs,
    make_temp,
    remove_stale_temps,
    write_json_atomic,
)

__all__ = [
    "ANALYSIS_DIR",
    "ANALYSIS_FILES",
    "ANALYSIS_OUTPUTS",
    "CRITIC_PREFIX",
    "PERTURB_DIR",
    "PERTURB_OUTPUTS",
    "ACTIVITY_DIR",
    "ACTIVITY_FILE_RE",
    "CALLBACK_FILES",
    "DEMO_FILES",
    "EVAL_FILES",
    "LAYOUT",
    "LOCK",
    "RUN_OUTPUTS",
    "MANIFEST",
    "claim_files",
    "continue_run_dir",
    "is_run_dir",
    "lock_run_dir",
    "prepare_run_dir",
    "read_manifest",
    "remove_stale_temps",
    "write_json_atomic",
]

#: The manifest file that marks a run directory and lists what snrl wrote there.
MANIFEST = ".snrl-run.json"
#: The lock file every process that writes a run holds (never listed, never deleted).
LOCK = ".snrl-run.lock"
_FORMAT = "snrl-run"
_VERSION = 2  # 2: the manifest records the directory it was written for ("dir", "device", "inode")

#: What every training run writes (directories end in ``/``), claimed when the run starts.
LAYOUT = (
    "checkpoints/",
    "config.json",
    "metrics.csv",
    "learning_curve.png",
    "learning_curve.svg",
    "checkpoints/best.pt",
    "checkpoints/last.pt",
)

#: The files ``snrl demo`` adds to a run directory (claimed before they are written).
DEMO_FILES = ("eval.json", "demo.mp4", "demo.gif")
#: What ``snrl eval`` writes into a run directory (the psychometric curve of a decision task,
#: the behaviour readouts of the tasks that have them).
EVAL_FILES = (
    "psychometric.png",
    "behaviour.png",
    "psychometric.svg",
    "psychometric.pdf",
    "behaviour.svg",
    "behaviour.pdf",
)

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
    "decoding.png",
    "tdr.png",
    "dpca.png",
    "connectivity.png",
    "task_variance.png",
    "fixed_points.png",
    "raster.svg",
    "rates_cv.svg",
    "ei_currents.svg",
    "tuning.svg",
    "psth.svg",
    "psth_decision.svg",
    "pca.svg",
    "decoding.svg",
    "tdr.svg",
    "dpca.svg",
    "connectivity.svg",
    "task_variance.svg",
    "fixed_points.svg",
    "raster.pdf",
    "rates_cv.pdf",
    "ei_currents.pdf",
    "tuning.pdf",
    "psth.pdf",
    "psth_decision.pdf",
    "pca.pdf",
    "decoding.pdf",
    "connectivity.pdf",
    "task_variance.pdf",
    "tdr.pdf",
    "dpca.pdf",
    "fixed_points.pdf",
    "compare.json",
    "compare.png",
    "compare.svg",
    "compare.pdf",
    "spikes.nwb",
    "spikes_neo.mat",
)
#: The prefix of the critic's own files in the analysis folder (an actor-critic run with
#: separate networks: the critic's ``summary.json`` and figures, ``critic_summary.json`` ...).
CRITIC_PREFIX = "critic_"
ANALYSIS_FILES += tuple(
    CRITIC_PREFIX + n for n in ANALYSIS_FILES[1:] if not n.startswith(("compare", "spikes"))
)

#: ``snrl analyze``'s default output folder in a run directory, and its files.
ANALYSIS_DIR = "analysis"
ANALYSIS_OUTPUTS = (f"{ANALYSIS_DIR}/", *(f"{ANALYSIS_DIR}/{n}" for n in ANALYSIS_FILES))

#: ``snrl perturb``'s default output folder in a run directory, and its files.
PERTURB_DIR = "perturb"
PERTURB_OUTPUTS = (
    f"{PERTURB_DIR}/",
    f"{PERTURB_DIR}/perturb.json",
    f"{PERTURB_DIR}/perturb.png",
    f"{PERTURB_DIR}/perturb.svg",
    f"{PERTURB_DIR}/perturb.pdf",
)

#: What ``snrl train --callback`` adds: the callbacks it ran, by name (``module:Name``).
CALLBACK_FILES = ("callbacks.json",)
#: The folder of :class:`snrl.callbacks.RecordActivity`'s trajectories, and their names
#: (``activity/update_000010_episode_0.npz``: recorded after update 10, its first episode).
ACTIVITY_DIR = "activity"
ACTIVITY_FILE_RE = re.compile(r"^activity/update_\d{6,}_episode_\d+\.npz\Z")

#: Every name snrl ever writes into a run directory: the only names a manifest may list
#: (with the recordings that :data:`ACTIVITY_FILE_RE` matches), so a crafted manifest in a
#: folder someone sent cannot make ``--force`` delete anything else.
RUN_OUTPUTS = (
    *LAYOUT,
    *DEMO_FILES,
    *EVAL_FILES,
    *ANALYSIS_OUTPUTS,
    *PERTURB_OUTPUTS,
    *CALLBACK_FILES,
    f"{ACTIVITY_DIR}/",
)


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


def _manifest_data(run_dir: Path) -> dict[str, Any] | None:
    """The manifest of ``run_dir`` as checked JSON (entries checked), or None without one."""
    path = run_dir / MANIFEST
    if not path.is_file() and not path.is_symlink():
        return None
    try:
        data = load_json(path.read_text(encoding="utf-8"), what=str(path))
    except (OSError, ValueError) as e:  # deep nesting too: a crafted manifest
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
    data["entries"] = [_check_entry(e, path) for e in entries]
    return data


def read_manifest(run_dir: str | os.PathLike) -> list[str] | None:
    """The entries of ``run_dir``'s manifest (directories end in ``/``), or None without one.

    Raises:
        UserError: If the manifest is unreadable, not snrl's, or lists a path that leaves
            the directory.
    """
    data = _manifest_data(Path(run_dir))
    return None if data is None else data["entries"]


def _write_manifest(run_dir: Path, entries: Iterable[str], *, bind: bool = False) -> None:
    """Write the manifest listing ``entries``. ``bind``: record ``run_dir``'s binding (only
    for a fresh manifest whose entries snrl checked do not exist yet); otherwise the binding
    of the manifest there, if any, is kept as it is."""
    unique = list(dict.fromkeys(entries))
    old = None if bind else _manifest_data(run_dir)
    binding = (
        dir_binding(run_dir)
        if bind
        else {k: old[k] for k in ("dir", "device", "inode") if old is not None and k in old}
    )
    write_json_atomic(
        run_dir / MANIFEST,
        {"format": _FORMAT, "version": _VERSION, **binding, "entries": unique},
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


def _clean_temps(run_dir: Path) -> None:
    remove_stale_temps(run_dir)
    remove_stale_temps(run_dir / "checkpoints")


def _check_writable(out: Path) -> None:
    try:
        fd, tmp = make_temp(out / ".snrl-write-test")
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
        if p.name not in (MANIFEST, LOCK) and p.name not in tops and not is_own_temp(p.name)
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
    data = _manifest_data(out)
    unbound = None if data is None else binding_mismatch(out, data)
    if unbound is not None:
        raise UserError(
            f"refusing to clear the run in {out}: its manifest {unbound} (delete the files "
            f"listed in {out / MANIFEST} by hand if they are yours to delete, or choose "
            "another --out)"
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


def _mkdir(out: Path) -> None:
    make_dirs(out, "run directory", "choose another --out")


def _create(out: Path, entries: Iterable[str], *, bind: bool) -> Path:
    """Make ``out`` a run directory claiming ``entries``. ``bind``: a new manifest records
    the directory (see :func:`_write_manifest`); an existing manifest keeps its own."""
    _mkdir(out)
    _check_writable(out)
    existing = read_manifest(out)
    # claimed before anything is written
    _write_manifest(out, [*(existing or []), *entries], bind=bind and existing is None)
    make_dirs(out / "checkpoints", "the checkpoint folder", "choose another --out")
    _clean_temps(out)
    return out


def _refuse_foreign(out: Path, foreign: list[Path], hint: str) -> None:
    raise UserError(
        f"{out} is not empty and is not an snrl run directory (it holds {_describe(foreign)}; "
        f"snrl writes only into new or empty directories and its own runs: {hint})"
    )


def _refuse_links(out: Path) -> None:
    """Refuse a run directory where one of snrl's names, or a directory on its way (say
    ``checkpoints``), is a symbolic link: writing it would write outside the run."""
    links = sorted(
        {
            "/".join(parts[: i + 1])
            for n in RUN_OUTPUTS
            for parts in [PurePosixPath(n.rstrip("/")).parts]
            for i in range(len(parts))
            if (out.joinpath(*parts[: i + 1])).is_symlink()
        }
    )
    if links:  # a crafted bundle: writing would go through the link, out of the run
        raise UserError(
            f"run directory {out} holds symbolic links ({', '.join(links)}); snrl writes "
            "its runs' files itself and will not write through a link (remove the links, "
            "or choose another run directory)"
        )


def _check_dir_arg(out: str | os.PathLike) -> Path:
    out = _check_path_arg(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"run directory {out} exists and is not a directory (choose another --out)")
    return out


@contextlib.contextmanager
def lock_run_dir(out: str | os.PathLike) -> Iterator[Path]:
    """Hold the run directory ``out``'s lock (:data:`LOCK`) while the block runs; ``out``
    is created when missing. Re-entrant within a process.

    When the block fails without having made ``out`` a new run directory, the lock file
    this call created is removed again (and the folders it created, while empty), so a
    refused folder is left as it was.

    Raises:
        UserError: ``out`` is a file or cannot be created; another process holds the lock
            (the message names it: pid, host, start time); ``out/.snrl-run.lock`` is a link
            or a file that snrl did not write.
    """
    out = _check_dir_arg(out)
    made = [d for d in (out, *out.parents) if not d.exists() and not d.is_symlink()]
    _mkdir(out)
    lock = out / LOCK
    made_lock = not lock.exists() and not lock.is_symlink()
    had_manifest = (out / MANIFEST).exists()
    with hold_lock(
        lock,
        what=f"run directory {out}",
        hint="another snrl run is writing there: wait for it to finish, or choose another --out",
    ):
        try:
            yield out
        except BaseException:
            if made_lock and (had_manifest or not is_run_dir(out)):  # not a run made here
                with contextlib.suppress(OSError):
                    lock.unlink()
                for d in made:  # the folders this call made, deepest first, while empty
                    try:
                        d.rmdir()
                    except OSError:
                        break
            raise


def prepare_run_dir(out: str | os.PathLike, *, resume: bool = False, force: bool = False) -> Path:
    """Create, reuse or replace the run directory ``out`` for a training run.

    Rules (checked and applied while holding the run's lock, :func:`lock_run_dir`):
        * both ``resume`` and ``force`` -> UserError;
        * ``resume``: ``out/checkpoints/last.pt`` must exist; nothing is deleted;
        * a new or empty directory (or a run that has written no file yet) is used as is;
        * ``force`` on an snrl run: the files its manifest lists are deleted, nothing else,
          and only when the manifest is bound to ``out`` (see the module docstring); refused
          when ``out`` is a symbolic link, for the current directory, its parents, the home
          directory and ``/``;
        * an existing run without ``force`` or ``resume`` -> UserError;
        * any other non-empty directory -> UserError naming what is there.

    Returns:
        ``out`` as a :class:`Path`, with ``checkpoints/`` and a manifest claiming
        :data:`LAYOUT`.

    Raises:
        UserError: For the cases above, when ``out`` is a file, is not writable, or another
            process holds its lock.
    """
    if resume and force:
        raise UserError("--resume and --force are mutually exclusive (pass at most one)")
    out = _check_dir_arg(out)
    if resume:
        last = out / "checkpoints" / "last.pt"
        if not last.is_file():
            raise UserError(
                f"cannot resume: {last} does not exist, so there is nothing to resume (start a "
                "new run without --resume, with --force to replace a partial one)"
            )
        return continue_run_dir(out)
    if force and out.is_symlink():
        raise UserError(
            f"--force will not replace a run through the symbolic link {out} (pass the "
            f"directory it points to, {out.resolve()}, or choose another --out)"
        )
    return _open_locked(out, functools.partial(_new_run, force=force))


def _open_locked(out: Path, then: Callable[..., Path]) -> Path:
    """``out`` created as a new run where it is no directory yet; else, under its lock and
    with no snrl name in it a link, ``then(out, entries, foreign, ours)`` (its
    :func:`_contents`)."""
    if not out.is_dir():
        with lock_run_dir(out):
            return _create(out, LAYOUT, bind=True)
    with lock_run_dir(out):
        _refuse_links(out)
        return then(out, *_contents(out))


def _new_run(
    out: Path, entries: list[str] | None, foreign: list[Path], ours: bool, *, force: bool
) -> Path:
    """:func:`prepare_run_dir`'s new run in the existing directory ``out`` (under its lock)."""
    if entries is None:
        if foreign:
            _refuse_foreign(out, foreign, "choose another --out")
        return _create(out, LAYOUT, bind=True)
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
            f"{out} holds {', '.join(clash)}, which snrl did not write and will not "
            "overwrite (move it away or choose another --out)"
        )
    _check_writable(out)
    _write_manifest(out, LAYOUT, bind=True)  # none of its files exists: a fresh manifest
    return _create(out, (), bind=False)


def continue_run_dir(out: str | os.PathLike) -> Path:
    """Open ``out`` to continue a run into it: an snrl run (kept as it is), a new or empty
    directory (created), or a run written before manifests existed (one with
    ``checkpoints/last.pt``, adopted; its manifest is not bound, so ``--force`` will not
    clear it). Nothing is deleted except stale temp files of snrl's.

    Raises:
        UserError: If ``out`` is a file, not writable, a non-empty directory that is not
            an snrl run, holds one of snrl's names as a symbolic link, or another process
            holds its lock.
    """
    return _open_locked(_check_dir_arg(out), _continued)


def _continued(out: Path, entries: list[str] | None, foreign: list[Path], ours: bool) -> Path:
    """:func:`continue_run_dir` in the existing directory ``out`` (under its lock)."""
    adopted = (out / "checkpoints" / "last.pt").is_file()
    if entries is None and foreign and not adopted:
        _refuse_foreign(out, foreign, "choose another run directory")
    if entries is not None and all(e in entries for e in LAYOUT):
        _check_writable(out)
        _clean_temps(out)
        return out
    # a new manifest binds the directory only when it held nothing (not an adopted run)
    return _create(out, LAYOUT, bind=entries is None and not foreign and not adopted)

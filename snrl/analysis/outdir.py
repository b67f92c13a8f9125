"""The output folder of ``snrl analyze``: what it may create, replace or delete there.

The folder (``RUN_DIR/analysis`` by default) holds a marker, ``.snrl-analysis.json``, that
lists the files snrl wrote there, bound to the folder as a run's manifest is (its resolved
path, device and inode, :func:`snrl.io.dir_binding`): a marker written for another folder
(copied, moved, planted) or by snrl 0.1 (no binding) vouches for nothing, so the files there
count as someone else's. Before anything is written, every name snrl may write
(:data:`snrl.training.rundir.ANALYSIS_FILES`) is checked: one that exists without being
listed belongs to someone else, and the analysis is refused (nothing is written). A rerun
replaces the files it writes again and deletes the listed ones it no longer writes (say, an
export of the last run); nothing else in the folder is touched. In a run directory the
default folder is also claimed in the run's manifest, so ``snrl train --force`` removes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from snrl.errors import UserError
from snrl.io import (
    binding_mismatch,
    check_no_links,
    dir_binding,
    load_json,
    make_dirs,
    write_json_atomic,
)
from snrl.training.rundir import (
    ANALYSIS_DIR,
    ANALYSIS_FILES,
    ANALYSIS_OUTPUTS,
    claim_files,
    is_run_dir,
)

__all__ = ["MARKER", "check_output_dir", "claim_output_dir", "finish_output_dir"]

MARKER = ANALYSIS_FILES[0]
_FORMAT = "snrl-analysis"


def _listed(out: Path) -> tuple[list[str], str | None]:
    """The files the folder's marker lists, and why it vouches for nothing (None: it does;
    its list is then the files snrl wrote here)."""
    path = out / MARKER
    if not path.is_file():
        return [], None
    try:
        data = load_json(path.read_text(encoding="utf-8"), what=str(path))
        files = data["files"] if data.get("format") == _FORMAT else None
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        files = None
    if not isinstance(files, list):
        raise UserError(
            f"{path} is corrupt (remove the folder's files by hand or choose another --out)"
        )
    why = binding_mismatch(out, data)
    if why is not None:
        return [], why  # not written here by snrl: it vouches for nothing
    return [f for f in files if f in ANALYSIS_FILES], None


def _write_marker(out: Path, files: list[str]) -> None:
    write_json_atomic(out / MARKER, {"format": _FORMAT, **dir_binding(out), "files": files})


def check_output_dir(base: str | Path, sub: str) -> Path:
    """Check ``base/sub`` for an analysis without writing anything (see
    :func:`claim_output_dir`); returns the folder."""
    return _check(Path(base), sub)


def claim_output_dir(base: str | Path, sub: str) -> Path:
    """Check and claim ``base/sub`` for an analysis; nothing is written before this passes.

    Args:
        base: the run (or comparison) directory.
        sub: the folder inside it (``--out``; a relative path without ``..``).

    Returns:
        The folder, created, with its marker listing every name snrl may write there.

    Raises:
        UserError: ``sub`` leaves ``base``, the folder is a file, it or a folder on the way
            is a link, or it holds one of snrl's names that snrl did not write.
    """
    base = Path(base)
    out = _check(base, sub)
    if is_run_dir(base) and PurePosixPath(sub) == PurePosixPath(ANALYSIS_DIR):
        claim_files(base, ANALYSIS_OUTPUTS)
    make_dirs(out, "the output folder", "choose another --out")
    _write_marker(out, list(ANALYSIS_FILES))
    return out


def _check(base: Path, sub: str) -> Path:
    p = PurePosixPath(sub)
    if not sub.strip() or p.is_absolute() or ".." in p.parts or "\\" in sub:
        raise UserError(
            f"--out {sub!r} is not a folder inside {base} (give a relative name such as "
            f"'{ANALYSIS_DIR}')"
        )
    out = check_no_links(base, sub)  # every component, not only the last
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file (remove it or choose another --out)")
    listed, unbound = _listed(out) if out.is_dir() else ([], None)
    foreign = [n for n in ANALYSIS_FILES if (out / n).exists() and n not in listed]
    if foreign and not (foreign == [MARKER] and listed):
        why = ""
        if MARKER in foreign and unbound is not None:
            why = f"; its {MARKER} vouches for nothing: {unbound}"
        raise UserError(
            f"{out} holds {', '.join(foreign)}, which snrl did not write there and will not "
            f"overwrite{why} (move them away or choose another --out)"
        )
    return out


def finish_output_dir(out: str | Path, written: Iterable[str | Path]) -> None:
    """After a successful analysis: delete snrl's files of an earlier run that this one did
    not write again, and list exactly the files written in the marker."""
    out = Path(out)
    names = {Path(w).name for w in written}
    listed, _ = _listed(out)  # only what a marker bound to this folder lists is snrl's
    for n in ANALYSIS_FILES[1:]:
        p = out / n
        if n in listed and n not in names and p.is_file() and not p.is_symlink():
            p.unlink()
    keep = [n for n in ANALYSIS_FILES[1:] if n in names]
    _write_marker(out, [MARKER, *keep])

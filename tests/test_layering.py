"""The import order of docs/architecture.md: a module imports only modules on its own floor
or on a floor below it. Every import counts, including those inside functions."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import snrl

#: Floors, lowest first (docs/architecture.md). A top-level module or a package of snrl.
FLOORS: list[tuple[str, ...]] = [
    ("errors", "io", "palette"),
    ("config", "zoo"),
    ("functional",),
    ("layers",),
    ("networks",),
    ("envs",),
    ("trajectory",),
    ("buffers",),
    ("training",),
    ("agents",),
    ("callbacks",),
    ("analysis",),
    ("plot", "render"),
    ("experiments",),
    ("cli", "dashboard"),
]
RANK = {name: i for i, floor in enumerate(FLOORS) for name in floor}
ROOT = Path(snrl.__file__).parent


def _unit(module: str) -> str | None:
    """'snrl.agents.ppo' -> 'agents'; 'snrl' (the package façade) -> None."""
    parts = module.split(".")
    if parts[0] != "snrl" or len(parts) == 1:
        return None
    return parts[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(ROOT.parent).with_suffix("")
    package = ".".join(rel.parts[:-1]) if rel.name != "__init__" else ".".join(rel.parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((node.lineno, mod))
    return found


def violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        me = _unit(".".join(rel.parts))
        if me is None or me in ("__init__", "__main__"):
            continue
        assert me in RANK, f"{path}: snrl.{me} is on no floor of docs/architecture.md"
        for lineno, mod in _imports(path):
            other = _unit(mod)
            if other is None and mod.split(".")[0] == "snrl":
                bad.append(f"{rel}.py:{lineno} imports the snrl façade")
                continue
            if other is None or other == me:
                continue
            assert other in RANK, f"{path}:{lineno}: snrl.{other} is on no floor"
            if RANK[other] > RANK[me]:
                bad.append(f"{rel}.py:{lineno}: {me} (floor {RANK[me]}) imports {mod} "
                           f"(floor {RANK[other]})")
    return bad


def test_every_import_points_down():
    assert violations() == []


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: an import of agents from layers is reported."""
    fake = tmp_path / "snrl"
    (fake / "layers").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "layers" / "__init__.py").write_text("")
    (fake / "layers" / "x.py").write_text("def f():\n    from snrl.agents import PPO\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake)
    got = violations()
    assert len(got) == 1 and "layers (floor 3) imports snrl.agents" in got[0]

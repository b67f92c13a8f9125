"""The import order of docs/architecture.md: a module imports only modules on its own floor
or on a floor below it. Every import counts, including those inside functions."""

from __future__ import annotations

import ast
import functools
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
    ("learning",),
    ("envs",),
    ("tasks",),
    ("trajectory",),
    ("buffers",),
    ("training",),
    ("agents",),
    ("callbacks", "export"),
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
                bad.append(
                    f"{rel}.py:{lineno}: {me} (floor {RANK[me]}) imports {mod} "
                    f"(floor {RANK[other]})"
                )
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


def _module_name(path: Path) -> str:
    """snrl/agents/ppo.py -> 'snrl.agents.ppo'; snrl/agents/__init__.py -> 'snrl.agents'."""
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(mod: str, known: set[str]) -> str | None:
    """The snrl module that an import of ``mod`` loads last: ``mod`` itself, else the
    package it is a name in (``from snrl.x import y``: snrl.x.y if a module, else snrl.x)."""
    while mod and mod not in known:
        mod = mod.rpartition(".")[0]
    return mod if mod and mod != "snrl" else None


def import_graph() -> dict[str, set[str]]:
    """Module -> the snrl modules it imports (every import, those inside functions too; a
    package's ``__init__`` is the package's module)."""
    paths = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
    known = set(paths)
    graph: dict[str, set[str]] = {m: set() for m in known}
    for me, path in paths.items():
        for _lineno, mod in _imports(path):
            # ``from pkg import sub`` depends on the module pkg.sub (pkg is loaded first by
            # Python in any case); ``from pkg import name`` on pkg itself
            names = _names(path, mod)
            subs = [f"{mod}.{a}" for a in names if f"{mod}.{a}" in known]
            targets = subs + ([mod] if len(subs) < len(names) or not names else [])
            for target in targets:
                other = _resolve(target, known)
                if other is None or other == me:
                    continue
                graph[me].add(other)
    return graph


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _names(path: Path, mod: str) -> list[str]:
    """The names ``from mod import a, b`` takes in ``path`` (submodules among them count)."""
    tree = _tree(path)
    return [
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == mod and not node.level
        for a in node.names
    ]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle found by a depth-first walk, as the modules around it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for o in sorted(graph[m]):
            if state.get(o) == 1:
                found.append(stack[stack.index(o) :] + [o])
            elif o not in state:
                visit(o)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_no_import_circles():
    """No circle of imports, on one floor or inside a package (e.g. dashboard -> cli ->
    dashboard): each floor's modules form a one-way graph too."""
    assert [" -> ".join(c) for c in cycles(import_graph())] == []


def test_the_checker_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]

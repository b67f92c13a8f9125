"""No function in snrl/ is longer than 120 lines (issue 31: a function a reader can hold in
one sitting; a longer one is split along its steps)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "snrl"
MAX_LINES = 120


def long_functions(source: str, where: str, limit: int = MAX_LINES) -> list[str]:
    """``where:line name (n lines)`` of every function of ``source`` longer than ``limit``
    lines, counted from its first decorator (or ``def``) to its last line, docstring
    included; nested functions count on their own and inside the one holding them."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            n = node.end_lineno - first + 1
            if n > limit:
                out.append(f"{where}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_is_over_120_lines():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == []


def test_the_checker_counts_decorators_docstrings_and_nested_functions():
    body = "\n".join(f"        x{i} = {i}" for i in range(5))
    source = f'@staticmethod\ndef f():\n    """doc."""\n    def g():\n{body}\n{body}\n'
    # f: decorator + def + docstring + def g + 10 lines = 14; g: def + 10 lines = 11
    assert long_functions(source, "m.py", limit=13) == ["m.py:2 f (14 lines)"]
    assert long_functions(source, "m.py", limit=10) == [
        "m.py:2 f (14 lines)",
        "m.py:4 g (11 lines)",
    ]
    assert long_functions(source, "m.py", limit=14) == []

"""docs/analysis.md's table of summary numbers is generated from snrl.analysis.METRICS.

Regenerate with ``SNRL_WRITE_DOCS=1 python -m pytest tests/analysis/test_docs_analysis.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from snrl.analysis import METRICS, metrics_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "analysis.md"
GENERATORS = {
    "metrics_table()": metrics_table,
    "metrics_table('neuron')": lambda: metrics_table("neuron"),
}
MARKER = re.compile(r"^<!-- generated: (.+) -->\n", re.M)


def _blocks(text):
    for m in MARKER.finditer(text):
        end = m.end()
        while text.startswith("|", end):
            end = text.index("\n", end) + 1
        yield m.group(1), m.end(), end


def test_metrics_table_matches_the_code():
    text = DOC.read_text(encoding="utf-8")
    blocks = list(_blocks(text))
    assert blocks, "docs/analysis.md lost its generated table"
    for call, start, end in reversed(blocks):
        want = GENERATORS[call]()
        if os.environ.get("SNRL_WRITE_DOCS") == "1":
            text = text[:start] + want + text[end:]
        else:
            assert text[start:end] == want, f"the table {call} is stale (regenerate it)"
    if os.environ.get("SNRL_WRITE_DOCS") == "1":
        DOC.write_text(text, encoding="utf-8")


def test_every_number_has_a_definition_and_unit():
    for name, m in METRICS.items():
        assert m.definition and m.unit, name
        assert f"| `{name}` |" in metrics_table()

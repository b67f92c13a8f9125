"""docs/architecture.md's table of defaults is generated from the code and must match it.

Regenerate it with ``SNRL_WRITE_DOCS=1 python -m pytest tests/test_docs_defaults.py``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from snrl.agents import DQNConfig, PPOConfig
from snrl.config import NEURON_DEFAULTS, defaults_table, override

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
START = "<!-- generated: snrl.config.defaults_table (tests/test_docs_defaults.py) -->"


def _documented() -> tuple[str, str, str]:
    text = DOC.read_text(encoding="utf-8")
    head, sep, rest = text.partition(START + "\n")
    assert sep, f"{DOC} lost its generated-table marker"
    lines = rest.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith("|"):
        n += 1
    return head + sep, "".join(lines[:n]), "".join(lines[n:])


def test_docs_table_matches_the_code():
    head, table, tail = _documented()
    want = defaults_table(PPOConfig, DQNConfig)
    if os.environ.get("SNRL_WRITE_DOCS") == "1":
        DOC.write_text(head + want + tail, encoding="utf-8")
        table = want
    assert table == want, "docs/architecture.md's defaults table is stale (see this file's doc)"


@pytest.mark.parametrize("cls", [PPOConfig, DQNConfig])
def test_agent_fields_take_the_table_value_unless_overridden(cls):
    """A config field named like a table entry either has the table's value or says why not."""
    for f in dataclasses.fields(cls):
        if f.name in NEURON_DEFAULTS and "override" not in f.metadata:
            assert f.default == NEURON_DEFAULTS[f.name], (cls.__name__, f.name)


def test_table_marks_an_override_and_its_reason():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Cfg:
        tau_m: float = override(5e-3, "faster membranes for this test")
        dt: float = NEURON_DEFAULTS["dt"]

    table = defaults_table(Cfg)
    row = next(line for line in table.splitlines() if line.startswith("| `tau_m`"))
    assert "**`0.005`**" in row and "Cfg: faster membranes for this test" in row
    row = next(line for line in table.splitlines() if line.startswith("| `dt`"))
    assert "**" not in row and row.count("`0.001`") == 2


def test_layers_and_backbones_take_their_defaults_from_the_table():
    """A network built by hand (layers, SpikingBackbone, build_backbone) starts from the same
    values as the table: no second literal anywhere."""
    import inspect

    from snrl.layers import ALIFLayer, LIFLayer, LILayer, SpyLIFLayer
    from snrl.networks.factory import build_backbone
    from snrl.networks.spiking import SpikingBackbone

    seen = set()
    for fn in (LIFLayer, ALIFLayer, SpyLIFLayer, LILayer, SpikingBackbone, build_backbone):
        for name, p in inspect.signature(fn).parameters.items():
            if name in NEURON_DEFAULTS:
                assert p.default == NEURON_DEFAULTS[name], (fn.__name__, name, p.default)
                seen.add(name)
    assert seen == set(NEURON_DEFAULTS), set(NEURON_DEFAULTS) - seen

"""The tables in docs/ that are generated from the code (the table of defaults, the config
keys of each algorithm) must match it: each follows a marker ``<!-- generated: CALL -->``.

Regenerate them with ``SNRL_WRITE_DOCS=1 python -m pytest tests/test_docs_defaults.py``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from snrl.agents import A2CConfig, DQNConfig, PPOConfig
from snrl.config import NEURON_DEFAULTS, config_table, defaults_table, override
from snrl.networks.nir_io import parameter_table

DOCS = Path(__file__).resolve().parents[1] / "docs"
GENERATORS = {
    "defaults_table(PPOConfig, DQNConfig)": lambda: defaults_table(PPOConfig, DQNConfig),
    "config_table(PPOConfig)": lambda: config_table(PPOConfig),
    "config_table(DQNConfig)": lambda: config_table(DQNConfig),
    "config_table(A2CConfig)": lambda: config_table(A2CConfig),
    "parameter_table()": parameter_table,
}
MARKER = re.compile(r"^<!-- generated: (.+) -->\n", re.M)


def _blocks(text: str):
    """(call, start, end) of each generated table: the lines starting with '|' after a marker."""
    for m in MARKER.finditer(text):
        end = m.end()
        while text.startswith("|", end):
            end = text.index("\n", end) + 1
        yield m.group(1), m.end(), end


@pytest.mark.parametrize("doc", ["architecture.md", "agents.md", "interop.md"])
def test_generated_tables_match_the_code(doc):
    path = DOCS / doc
    text = path.read_text(encoding="utf-8")
    blocks = list(_blocks(text))
    assert blocks, f"{doc} lost its generated tables"
    for call, start, end in reversed(blocks):
        assert call in GENERATORS, f"{doc}: unknown generated block {call!r}"
        want = GENERATORS[call]()
        if os.environ.get("SNRL_WRITE_DOCS") == "1":
            text = text[:start] + want + text[end:]
        else:
            assert text[start:end] == want, f"{doc}: the table {call} is stale (see this file)"
    if os.environ.get("SNRL_WRITE_DOCS") == "1":
        path.write_text(text, encoding="utf-8")


def test_every_config_key_is_documented_in_its_class():
    """A key without a docstring would leave an empty cell in the generated tables."""
    from snrl.config import field_docs

    for cls in (PPOConfig, A2CConfig, DQNConfig):
        docs = field_docs(cls)
        missing = [f.name for f in dataclasses.fields(cls) if f.init and not docs.get(f.name)]
        assert not missing, (cls.__name__, missing)


@pytest.mark.parametrize("cls", [PPOConfig, A2CConfig, DQNConfig])
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

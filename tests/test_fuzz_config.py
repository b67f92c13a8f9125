"""Fuzz of the CLI's config path: generated TOML files and ``--set`` items (wrong types,
huge/NaN/inf numbers, unknown keys, unicode, nested tables, empty files, bad bytes).

Every case must end in a valid config or in one ``error:`` line with exit code 2 — never a
traceback — and nothing may be written outside the run directory. The cases go through
``snrl.cli.main`` in this process (training replaced by the checks that run before anything
is allocated: device and memory); a handful of the refused ones run again as real processes.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from snrl.agents import DQNConfig, PPOConfig

ROOT = Path(__file__).resolve().parents[1]
N_CASES = 240
KEYS = sorted(
    {f for cls in (PPOConfig, DQNConfig) for f in cls.__dataclass_fields__}
    | {"lr ", "Lr", "hidden-size", "hiden_size", "ünïcødé", "", "a.b", "ppo", "总步数"}
)
NUMBERS = [
    0,
    1,
    -1,
    7,
    2**31,
    2**53 + 1,
    2**63,
    10**30,
    -(10**400),
    0.5,
    -0.0,
    1e-320,
    1e308,
    math.inf,
    -math.inf,
    math.nan,
]
STRINGS = ["", "lif", "mlp", "cpu", "cuda", "none", "true", "no", "1e20", "nan", "ünï\u200bcødé"]


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string (\uXXXX escapes included)
    if isinstance(v, list):
        return "[" + ", ".join(map(toml_value, v)) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.choice(["num", "num", "str", "bool", "list", "table"] if depth < 2 else ["num"])
    if kind == "num":
        return rng.choice(NUMBERS)
    if kind == "str":
        return rng.choice(STRINGS)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(KEYS) or "k": random_value(rng, depth + 1)}


def set_text(v: object) -> str:
    if isinstance(v, float) and math.isfinite(v):
        return repr(v)
    if isinstance(v, (list, dict)):
        return toml_value(v)
    return str(v).lower() if isinstance(v, bool) else str(v)


def make_case(rng: random.Random, i: int, folder: Path) -> list[str]:
    """CLI arguments of one case (the TOML file it names is written into ``folder``)."""
    args: list[str] = []
    cls = PPOConfig
    if rng.random() < 0.3:
        args += ["--algo", "dqn"]
        cls = DQNConfig
    if rng.random() < 0.15:  # plausible: fields set to their defaults, scaled ints
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(sorted(cls.__dataclass_fields__))
            value = getattr(cls(), key)
            if isinstance(value, int) and not isinstance(value, bool):
                value *= rng.choice([1, 2])
            args += ["--set", f"{key}={set_text(value)}"]
        return args
    style = rng.random()
    if style < 0.7:
        path = folder / f"c{i}.toml"
        args += ["--config", str(path)]
        if style < 0.05:
            path.write_bytes(b"")
        elif style < 0.1:
            path.write_bytes(b'env = "\xff\xfe"\n')
        elif style < 0.15:
            path.write_text("lr = = 3\n[[", encoding="utf-8")
        else:
            lines = [
                f"{json.dumps(rng.choice(KEYS))} = {toml_value(random_value(rng))}"
                for _ in range(rng.randint(1, 4))
            ]
            if rng.random() < 0.15:
                lines.append(f"[{json.dumps(rng.choice(KEYS) or 'k')}]\nx = 1")
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for _ in range(rng.randint(0 if style < 0.7 else 1, 3)):
        key = rng.choice(KEYS)
        item = f"{key}={set_text(random_value(rng))}"
        args += ["--set", rng.choice([item, item, item, key, "=" + key])]
    return args


@pytest.fixture
def no_training(monkeypatch):
    """Replace training by the checks that run before anything is allocated."""
    from snrl.agents.base import _available_device
    from snrl.cli import commands as cli

    seen: list[object] = []

    def fake_train_run(out, *, algo, config, force, progress, callbacks=None):
        _available_device(config.device)
        config.check_memory(4, 2)  # CartPole's sizes
        seen.append(config)

    monkeypatch.setattr(cli, "train_run", fake_train_run)
    return seen


def tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def test_fuzzed_configs_end_in_a_config_or_one_error_line(
    tmp_path, capsys, monkeypatch, no_training
):
    from snrl.cli import main

    cfgs, cwd = tmp_path / "cfgs", tmp_path / "cwd"
    cfgs.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    rng = random.Random(20261201)
    root_before = tree(ROOT / "snrl") | set(os.listdir(ROOT))
    outcomes = {0: 0, 2: 0}
    refused: list[list[str]] = []
    for i in range(N_CASES):
        args = ["train", *make_case(rng, i, cfgs), "--out", str(tmp_path / "run"), "--quiet"]
        before = tree(tmp_path)
        try:
            rc = main(args)
        except SystemExit as e:  # argparse's one line
            rc = e.code
        out, err = capsys.readouterr()
        assert rc in (0, 2), (args, err)
        outcomes[rc] += 1
        if rc == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
            assert "Traceback" not in err
            refused.append(args)
        else:
            assert isinstance(no_training[-1], (PPOConfig, DQNConfig)), args
        assert tree(tmp_path) == before, args  # no file written anywhere
    assert set(os.listdir(cwd)) == set()
    assert tree(ROOT / "snrl") | set(os.listdir(ROOT)) == root_before
    # the generator reaches both outcomes, mostly refusals
    print(f"fuzz outcomes: {outcomes[0]} valid configs, {outcomes[2]} refused")
    assert outcomes[0] >= 5 and outcomes[2] >= N_CASES // 2, outcomes
    # a handful of the refused cases as real processes: exit 2, one line, no traceback
    picks = random.Random(1).sample(refused, 4)
    for args in picks:
        res = subprocess.run(
            [sys.executable, "-m", "snrl.cli", *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
            timeout=120,
        )
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, (args, res.stderr)
        assert lines[0].startswith("error: ") and "Traceback" not in res.stderr
    assert not (tmp_path / "run").exists() and set(os.listdir(cwd)) == set()

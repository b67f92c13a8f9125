"""examples/compare_spiking_vs_ann.py --quick runs as a user would and writes its report."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_compare_example_quick(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "compare_spiking_vs_ann.py"), "--quick"]
        + ["--out", str(out), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    with open(out / "summary.csv", newline="") as f:
        groups = [r["group"] for r in csv.DictReader(f)]
    assert groups == ["lif force_dale_law=true", "lif force_dale_law=false", "mlp"]
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        f"{g}__seed{s}"
        for g in ("lif__force_dale_law=true", "lif__force_dale_law=false", "mlp")
        for s in (0, 1)
    )
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Mann-Whitney U" in proc.stdout and "report:" in proc.stdout

"""examples/dale_network.py runs as a user would run it and writes its PNG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_dale_network_example_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "raster.png"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "dale_network.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
    assert "spikes per neuron per step: {'lif0': " in proc.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["raster.png"]  # no temp file left

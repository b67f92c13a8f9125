"""Copy a figure or screenshot into docs/img/ as a small PNG: a 256-colour palette image
(median cut, no dithering), which keeps line plots and screenshots sharp at about half the
bytes of matplotlib's or Chromium's RGB(A) PNGs.

Usage::

    python benchmarks/docs_png.py SRC.png docs/img/NAME.png [SRC2.png docs/img/NAME2.png ...]

Pillow comes with matplotlib; nothing else is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path


def palette_png(src: Path, dst: Path) -> tuple[int, int]:
    """Write ``src`` to ``dst`` as an optimized 256-colour PNG; returns (bytes before, after)."""
    from PIL import Image

    with Image.open(src) as im:
        small = im.convert("RGB").quantize(
            colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    small.save(dst, optimize=True)
    return src.stat().st_size, dst.stat().st_size


def main(argv: list[str]) -> int:
    if not argv or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    for src, dst in zip(argv[::2], argv[1::2]):
        before, after = palette_png(Path(src), Path(dst))
        print(f"{dst}: {before / 1e3:.0f} kB -> {after / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

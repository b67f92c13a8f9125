"""Video writers (GIF, MP4) with atomic output, and output-path rules.

Both writers take one RGB frame at a time. The MP4 writer streams (at most two frames in
memory); the GIF writer keeps each frame as palette indices until it is closed.

- MP4: H.264 (libx264) in yuv420p through the ffmpeg binary of ``imageio-ffmpeg``, fed raw
  RGB over a pipe; ``+faststart`` so browsers can play while loading. Frame sizes must be
  even (the renderer pads them).
- GIF: one global 256-colour palette chosen from sample frames (the most frequent exact
  colours plus a median cut of the rest); each pixel is mapped, without dithering, through
  a 32768-entry table (5 bits per channel -> nearest palette index), only where it changed
  since the previous frame. The index frames go through imageio's pillow plugin with that
  palette (no quantization by Pillow); Pillow stores only the rectangle that changed since
  the previous frame. Loops forever; GIF delays are whole centiseconds, spread so the
  average frame rate is exact. Pillow writes a GIF in one go, so the index frames (one byte
  per pixel) are held until ``close``, and Pillow holds its own copy while writing.

Files are written to a temporary name in the destination directory
(:func:`snrl.io.atomic_path`) and moved into place, fsynced, only when complete; on any
error the temporary file is removed.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from snrl.errors import UserError, first_line
from snrl.io import AtomicPath, atomic_path, make_dirs

VIDEO_EXTENSIONS = (".gif", ".mp4")
MAX_GIF_FPS = 50.0


def resolve_output(
    path: str | os.PathLike[str], kind: str | None, *, create: bool = True
) -> tuple[Path, str]:
    """Decide the file written for ``path`` and its format, creating parent directories.

    Args:
        path: where the user asked to write (relative paths are relative to the cwd).
        kind: ``"gif"``/``"mp4"`` for ``to_gif``/``to_mp4`` (a missing extension is added),
            or ``None`` for ``to_file`` (the extension decides).
        create: create the parent directories (else only check the path).

    Returns:
        ``(path, kind)``: the exact file to write and ``"gif"`` or ``"mp4"``.

    Raises:
        UserError: unknown or conflicting extension, or a parent that cannot be created.
    """
    raw = os.fspath(path)
    if not raw or raw.endswith(("/", os.sep)):
        raise UserError(f"output path {raw!r} is not a file name (give e.g. out/episode.mp4)")
    p = Path(raw)
    ext = p.suffix.lower()
    allowed = ", ".join(VIDEO_EXTENSIONS)
    if kind is None:
        if ext not in VIDEO_EXTENSIONS:
            what = f"extension {p.suffix!r}" if ext else "no extension"
            raise UserError(f"output {raw!r} has {what} (use one of {allowed})")
        kind = ext[1:]
    elif ext == "":
        p = p.with_name(p.name + "." + kind)
    elif ext != "." + kind:
        raise UserError(
            f"output {raw!r} has extension {p.suffix!r} but a .{kind} was asked for "
            f"(use one of {allowed} matching the method, or to_file to choose by extension)"
        )
    parent = p.parent
    for above in (parent, *parent.parents):
        if above.exists():
            if not above.is_dir():
                raise UserError(
                    f"cannot write {p}: {above} is a file, not a directory (choose another path)"
                )
            break
    if p.is_dir():
        raise UserError(f"output {p} is a directory (give a file name such as {p / 'ep.mp4'})")
    if not create:
        return p, kind
    make_dirs(parent, "directory", "choose a writable path")
    if p.is_dir():
        raise UserError(f"output {p} is a directory (give a file name such as {p / 'ep.mp4'})")
    if not os.access(parent, os.W_OK):
        raise UserError(f"directory {parent} is not writable (choose a writable path)")
    return p, kind


def gif_delays_cs(n: int, fps: float) -> np.ndarray:
    """Per-frame GIF delays in centiseconds whose running sum tracks ``k * 100 / fps``.

    Example: fps=30 gives 3, 4, 3, 3, 4, 3, ... (33.3 ms on average).
    """
    edges = np.round(np.arange(n + 1) * (100.0 / fps)).astype(np.int64)
    return np.maximum(np.diff(edges), 1)


def _target(path: Path) -> AtomicPath:
    """The temp file that becomes ``path`` (see :func:`snrl.io.atomic_path`)."""
    try:
        return atomic_path(path)
    except OSError as exc:
        raise UserError(
            f"cannot write in {path.parent}: {exc.strerror or exc} (choose a writable path)"
        ) from exc


class Mp4Writer:
    """Stream RGB frames to an H.264/yuv420p MP4 through ffmpeg.

    Args:
        path: final file.
        size: ``(width, height)`` in pixels, both even.
        fps: frames per second.
        crf: x264 constant rate factor (lower = better quality, bigger file).
        preset: x264 speed preset.
    """

    def __init__(
        self,
        path: Path,
        *,
        size: tuple[int, int],
        fps: float,
        crf: int = 23,
        preset: str = "veryfast",
    ) -> None:
        import imageio_ffmpeg

        w, h = size
        if w % 2 or h % 2:
            raise ValueError(f"MP4 frame size {size} must be even (pad the frames)")
        self.size = size
        self._file = _target(path)
        self._gen = imageio_ffmpeg.write_frames(
            str(self._file.tmp),
            size,
            fps=fps,
            codec="libx264",
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            quality=None,
            macro_block_size=1,
            ffmpeg_log_level="error",
            output_params=["-preset", preset, "-crf", str(crf), "-movflags", "+faststart"]
            + ["-f", "mp4"],
        )
        try:
            self._gen.send(None)
        except BaseException:
            self._file.discard()
            raise

    def write(self, frame: np.ndarray) -> None:
        """Append one (H, W, 3) uint8 frame."""
        if frame.shape != (self.size[1], self.size[0], 3):
            raise ValueError(f"frame shape {frame.shape} != {(self.size[1], self.size[0], 3)}")
        try:
            self._gen.send(np.ascontiguousarray(frame))
        except OSError as exc:
            raise self._stopped(exc) from None

    def close(self) -> None:
        """Finish the video and move it into place."""
        try:
            self._gen.close()
        except OSError as exc:
            error = self._stopped(exc)
            self._file.discard()
            raise error from None
        except BaseException:
            self._file.discard()
            raise
        self._file.commit()

    def _stopped(self, exc: OSError) -> OSError:
        """ffmpeg stopped reading frames: a full disk (ENOSPC) when the directory has less
        than 16 MiB free, else ffmpeg's first line of text (not its whole log)."""
        try:
            full = shutil.disk_usage(self._file.tmp.parent).free < 16 * 2**20
        except OSError:
            full = False
        if full or exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self._file.path))
        first = first_line(exc)
        return OSError(
            exc.errno or errno.EPIPE,
            f"ffmpeg stopped while writing the video ({first})",
            str(self._file.path),
        )

    def abort(self) -> None:
        """Stop ffmpeg and remove the partial file."""
        try:
            self._gen.close()
        except Exception:  # noqa: BLE001 - ffmpeg's complaint is not the error to report
            pass
        self._file.discard()


def build_palette(
    samples: Sequence[np.ndarray],
    *,
    required: np.ndarray | None = None,
    n_exact: int = 96,
    max_pixels: int = 400_000,
) -> np.ndarray:
    """A (256, 3) uint8 palette for the given sample images.

    Kept exactly, in this order: the ``required`` colours (e.g. the activity panel's spike,
    trace and bar colours), then the most frequent exact colours of the samples (flat
    backgrounds, text) up to ``n_exact`` in all; the remaining entries come from Pillow's
    median-cut quantizer. Samples are subsampled regularly to ``max_pixels`` pixels. The 256
    entries are distinct colours (unused ones are padded from a coarse colour grid).

    Pillow is imported directly here (it is declared): imageio writes palette images but has
    no API to build a palette from sample pixels, and Pillow's median cut is the well-kept
    one at hand.
    """
    from PIL import Image

    pixels = np.concatenate([s.reshape(-1, 3) for s in samples], axis=0)
    if pixels.shape[0] > max_pixels:
        pixels = pixels[:: pixels.shape[0] // max_pixels + 1]

    def keys_of(px: np.ndarray) -> np.ndarray:
        px = px.astype(np.int32)
        return (px[:, 0] << 16) | (px[:, 1] << 8) | px[:, 2]

    uniq, counts = np.unique(keys_of(pixels), return_counts=True)
    frequent = uniq[np.argsort(-counts, kind="stable")]
    req = (
        np.zeros(0, np.int32) if required is None else keys_of(np.asarray(required).reshape(-1, 3))
    )
    req = req[np.sort(np.unique(req, return_index=True)[1])][:n_exact]  # unique, order kept
    exact = np.concatenate([req, frequent[~np.isin(frequent, req)]])
    if uniq.shape[0] + req.shape[0] <= 256:
        chosen = exact
    else:
        exact = exact[: max(n_exact, req.shape[0])]
        n_rest = 256 - exact.shape[0]
        img = Image.fromarray(np.ascontiguousarray(pixels.reshape(1, -1, 3)))
        q = img.quantize(colors=n_rest, method=Image.Quantize.MEDIANCUT)
        pal = np.array(q.getpalette()[: 3 * n_rest], dtype=np.int32).reshape(-1, 3)
        rest = (pal[:, 0] << 16) | (pal[:, 1] << 8) | pal[:, 2]
        rest = rest[np.sort(np.unique(rest, return_index=True)[1])]  # unique, order kept
        chosen = np.concatenate([exact, rest[~np.isin(rest, exact)]])[:256]
    if chosen.shape[0] < 256:  # pad with distinct colours of a coarse grid (8 levels each)
        levels = np.arange(8, dtype=np.int32) * 36 + 2
        grid = (levels[:, None, None] << 16) | (levels[None, :, None] << 8) | levels[None, None]
        spare = grid.ravel()[~np.isin(grid.ravel(), chosen)]
        chosen = np.concatenate([chosen, spare[: 256 - chosen.shape[0]]])
    palette = np.zeros((256, 3), dtype=np.uint8)
    palette[:, 0] = (chosen >> 16) & 255
    palette[:, 1] = (chosen >> 8) & 255
    palette[:, 2] = chosen & 255
    return palette


def palette_lut(palette: np.ndarray) -> np.ndarray:
    """(32768,) uint8: for each 5-5-5-bit colour cell, the index of the nearest palette entry.

    Where several palette colours share a cell, the one with the lowest index (required and
    most frequent colours first, see :func:`build_palette`) owns the cell, so flat
    backgrounds stay exact.
    """
    levels = np.arange(32, dtype=np.float32) * 8 + 4
    r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
    centres = np.stack([r.ravel(), g.ravel(), b.ravel()], axis=1)  # (32768, 3)
    pal = palette.astype(np.float32)
    # |c - p|^2 = |c|^2 - 2 c.p + |p|^2; |c|^2 does not change the argmin over p.
    half_pp = 0.5 * (pal * pal).sum(1)
    lut = np.empty(32768, dtype=np.uint8)
    for start in range(0, 32768, 2048):  # small blocks stay in cache
        d = centres[start : start + 2048] @ pal.T
        np.subtract(half_pp, d, out=d)
        lut[start : start + 2048] = d.argmin(axis=1)
    ipal = palette.astype(np.int32)
    keys = ((ipal[:, 0] >> 3) << 10) | ((ipal[:, 1] >> 3) << 5) | (ipal[:, 2] >> 3)
    lut[keys[::-1]] = np.arange(len(keys) - 1, -1, -1, dtype=np.uint8)  # lowest index last
    return lut


def _gif_image_block(data: bytes) -> bytes:
    """The image descriptor, local colour table (if any) and LZW data of a one-frame GIF."""
    packed = data[10]
    pos = 13 + (3 * 2 ** ((packed & 7) + 1) if packed & 0x80 else 0)
    while pos < len(data):
        tag = data[pos]
        if tag == 0x21:  # an extension: label, then sub-blocks up to a zero length
            pos += 2
            while data[pos]:
                pos += data[pos] + 1
            pos += 1
        elif tag == 0x2C:
            start = pos
            ipacked = data[pos + 9]
            pos += 10 + (3 * 2 ** ((ipacked & 7) + 1) if ipacked & 0x80 else 0)
            pos += 1  # LZW minimum code size
            while data[pos]:
                pos += data[pos] + 1
            return data[start : pos + 1]
        else:
            break
    raise ValueError("no image in the GIF written by Pillow")  # pragma: no cover


class GifWriter:
    """Stream RGB frames into a looping GIF with one global palette.

    Each frame is mapped to palette indices here; only the rectangle that changed since the
    previous frame is stored, and inside it the pixels that did not change take the
    transparent index 255 (with "do not dispose", viewers keep the previous pixel there).
    Long runs of that one index compress to almost nothing, so a frame costs about what
    changed in it. Pillow compresses each rectangle (LZW, through its GIF encoder); this
    class writes the GIF container around those blocks (header, the global palette, the
    NETSCAPE loop extension, one graphic-control block per frame with its delay): Pillow can
    only write a whole animation at once, which would hold every frame in memory. A frame
    identical to the previous one is merged into it (their delays add up). Memory: two
    frames.

    Args:
        path: final file.
        size: ``(width, height)`` in pixels.
        fps: frames per second (at most 50: browsers slow down shorter delays).
        palette: (255, 3) or (256, 3) uint8 palette of distinct colours (see
            :func:`build_palette`); entry 255 is replaced by the transparent slot.
    """

    TRANSPARENT = 255

    def __init__(
        self, path: Path, *, size: tuple[int, int], fps: float, palette: np.ndarray
    ) -> None:
        colours = np.asarray(palette, dtype=np.uint8)[:255]
        keys = np.unique(colours.astype(np.int32) @ np.array([1 << 16, 1 << 8, 1]))
        if colours.shape != (255, 3) or keys.shape[0] != 255:
            raise ValueError("GIF palette must hold at least 255 distinct RGB colours")
        used = set(keys.tolist())
        spare = next(c for c in range(1 << 24) if c not in used)
        full = np.concatenate([colours, [[spare >> 16, (spare >> 8) & 255, spare & 255]]])
        self.size = size
        self.fps = float(fps)
        self._palette = full.astype(np.uint8).tobytes()
        self._lut = palette_lut(full)  # index 255 is never the nearest of a used colour ...
        self._lut[self._lut == self.TRANSPARENT] = palette_lut(colours)[
            self._lut == self.TRANSPARENT
        ]  # ... and never chosen at all
        self._rgb: np.ndarray | None = None  # the previous frame
        self._pending: tuple[bytes, int] | None = None  # encoded frame waiting for its delay
        self._n = 0
        self._file = _target(path)
        self._fh = open(self._file.tmp, "wb")  # noqa: SIM115 - closed in close/abort
        w, h = size
        head = b"GIF89a" + w.to_bytes(2, "little") + h.to_bytes(2, "little") + bytes([0xF7, 0, 0])
        loop = b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
        self._fh.write(head + self._palette + loop)

    def _indices(self, frame: np.ndarray) -> np.ndarray:
        """(H, W) palette index of each pixel via the 5-5-5-bit lookup table."""
        f = frame.astype(np.uint16)
        key = (f[..., 0] >> 3) << 10
        key |= (f[..., 1] >> 3) << 5
        key |= f[..., 2] >> 3
        return self._lut[key]

    def _changed(self, frame: np.ndarray, prev: np.ndarray) -> tuple[int, int, int, int] | None:
        """Bounding box ``(y0, y1, x0, x1)`` of the pixels that differ from ``prev``."""
        h, w = frame.shape[:2]
        a, b = frame.reshape(h, -1), prev.reshape(h, -1)
        if (w * 3) % 8 == 0:  # compare 8 bytes at a time
            a, b = a.view(np.uint64), b.view(np.uint64)
        rows = np.flatnonzero((a != b).any(axis=1))
        if rows.size == 0:
            return None
        diff = frame[rows[0] : rows[-1] + 1] != prev[rows[0] : rows[-1] + 1]
        cols = np.flatnonzero(diff.reshape(-1, w * 3).any(axis=0).reshape(w, 3).any(axis=1))
        return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1

    def _encode(self, idx: np.ndarray, y0: int, x0: int) -> bytes:
        """The image block of palette indices ``idx`` placed at (y0, x0), LZW by Pillow."""
        import io

        from PIL import Image

        im = Image.fromarray(np.ascontiguousarray(idx), mode="P")
        im.putpalette(self._palette)
        buf = io.BytesIO()
        im.save(buf, format="GIF", optimize=False)
        block = bytearray(_gif_image_block(buf.getvalue()))
        block[1:5] = x0.to_bytes(2, "little") + y0.to_bytes(2, "little")
        return bytes(block)

    def _delay(self, k: int) -> int:
        """Delay of frame k in centiseconds, so the running sum tracks k * 100 / fps."""
        return max(round((k + 1) * 100.0 / self.fps) - round(k * 100.0 / self.fps), 1)

    def _flush(self, transparent: bool) -> None:
        if self._pending is None:
            return
        block, delay = self._pending
        packed = (1 << 2) | (1 if transparent else 0)  # disposal 1: keep; transparency flag
        gce = bytes([0x21, 0xF9, 4, packed]) + min(delay, 65535).to_bytes(2, "little")
        self._fh.write(gce + bytes([self.TRANSPARENT, 0]) + block)
        self._pending = None

    def write(self, frame: np.ndarray) -> None:
        """Append one (H, W, 3) uint8 frame."""
        if frame.shape != (self.size[1], self.size[0], 3):
            raise ValueError(f"frame shape {frame.shape} != {(self.size[1], self.size[0], 3)}")
        delay = self._delay(self._n)
        self._n += 1
        if self._rgb is None:
            self._rgb = frame.copy()
            self._pending = (self._encode(self._indices(frame), 0, 0), delay)
            self._first = True
            return
        box = self._changed(frame, self._rgb)
        if box is None:  # identical: the previous frame stays up longer
            assert self._pending is not None
            self._pending = (self._pending[0], self._pending[1] + delay)
            return
        self._flush(transparent=not self._first)
        self._first = False
        y0, y1, x0, x1 = box
        new, old = frame[y0:y1, x0:x1], self._rgb[y0:y1, x0:x1]
        d = new != old
        changed = d[..., 0] | d[..., 1] | d[..., 2]  # faster than .any(axis=-1)
        idx = np.full(changed.shape, self.TRANSPARENT, dtype=np.uint8)
        idx[changed] = self._indices(new[changed])
        self._rgb[y0:y1, x0:x1] = new
        self._pending = (self._encode(idx, y0, x0), delay)

    def close(self) -> None:
        """Finish the GIF and move it into place."""
        try:
            if self._n == 0:
                raise ValueError("a GIF needs at least one frame")
            self._flush(transparent=not self._first)
            self._fh.write(b"\x3b")
            self._fh.close()
        except BaseException:
            self.abort()
            raise
        self._file.commit()

    def abort(self) -> None:
        """Stop and remove the partial file."""
        self._fh.close()
        self._file.discard()


class ThreadedWriter:
    """Run a writer's ``write`` in a background thread, so composing the next frame overlaps
    with encoding this one (numpy and pipe writes release the GIL).

    Frames are copied into a bounded queue (``depth`` frames), so memory stays bounded.
    An error in the thread is re-raised by the next :meth:`write` or by :meth:`close`.
    """

    def __init__(self, inner: GifWriter | Mp4Writer, depth: int = 3) -> None:
        import queue
        import threading

        self.inner = inner
        self._q: queue.Queue[np.ndarray | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="snrl-video-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            frame = self._q.get()
            if frame is None:
                return
            if self._error is None:
                try:
                    self.inner.write(frame)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, frame: np.ndarray) -> None:
        """Queue a copy of one (H, W, 3) uint8 frame."""
        self._raise()
        self._q.put(frame.copy())

    def close(self) -> None:
        """Wait for the queued frames, then finish the file."""
        self._q.put(None)
        self._thread.join()
        if self._error is not None:
            self.inner.abort()
            raise self._error
        self.inner.close()

    def abort(self) -> None:
        """Drop the queued frames and remove the partial file."""
        self._error = self._error or RuntimeError("aborted")
        self._q.put(None)
        self._thread.join()
        self.inner.abort()

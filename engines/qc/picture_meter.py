"""A streaming picture meter: one decoded frame's Y, U, V planes at a time, a few numbers per frame kept.

Per frame it keeps:
- legal levels, on every pixel: the extremes of luma and chroma and, where they leave the legal window, the share
  of the picture outside it (EBU R103 tolerates violations over less than 1 % of the area);
- on an analysis grid (luma sampled every `stride` pixels so the short side is about 270 samples, then 16x16
  sample blocks; a 1080x1920 frame gives 16x30 blocks of 64x64 pixels): each block's mean luma and its mean absolute
  change from the previous frame. Those two [frames, blocks] tables are all that the freeze, flicker and lip-sync
  checks need, so nothing of the picture itself is held;
- the share of black analysis samples (FFmpeg blackdetect's rule).

Code values are 8-bit units whatever the file's depth (10-bit planes are divided by 4), so thresholds read alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

ANALYSIS_SHORT_SIDE = 270
BLOCK = 16


@dataclass(frozen=True)
class LevelWindow:
    """Legal code values (in the plane's own units) for luma and chroma."""

    luma_lo: float
    luma_hi: float
    chroma_lo: float
    chroma_hi: float
    black: float         # luma below this is black (8-bit units, for the analysis grid)


def level_window(full_range: bool, bit_depth: int, luma_min_pct: float, luma_max_pct: float,
                 chroma_max_pct: float, black_pct: float) -> LevelWindow:
    """The legal window of a limited-range (16-235 / 16-240) or full-range file, in its code values."""
    scale = 4.0 if bit_depth > 8 else 1.0
    if full_range:
        y0, y_span, c_mid, c_half = 0.0, 255.0, 128.0, 127.5
    else:
        y0, y_span, c_mid, c_half = 16.0, 219.0, 128.0, 112.0
    luma_lo = (y0 + y_span * luma_min_pct / 100.0) * scale
    luma_hi = (y0 + y_span * luma_max_pct / 100.0) * scale
    c_reach = c_half * chroma_max_pct / 100.0
    return LevelWindow(luma_lo, luma_hi, (c_mid - c_reach) * scale, (c_mid + c_reach) * scale,
                       y0 + y_span * black_pct / 100.0)


@dataclass
class PictureMeasurements:
    frames: int
    width: int
    height: int
    grid: tuple                       # (rows, cols) of analysis blocks
    block_px: tuple                   # (height, width) of one block in picture pixels
    luma_min: np.ndarray              # [frames] code values (plane units)
    luma_max: np.ndarray
    chroma_min: np.ndarray
    chroma_max: np.ndarray
    out_of_range_pct: np.ndarray      # [frames] share of pixels outside the window (luma or chroma), percent
    black_pct: np.ndarray             # [frames] share of black analysis samples, percent
    block_motion: np.ndarray          # [frames, blocks] mean |change| from the previous frame (row 0: zeros)
    block_luma: np.ndarray            # [frames, blocks] mean luma, 8-bit units
    thumbnails: list = field(default_factory=list)  # (frame index, uint8 [h, w, 3])


class PictureMeter:
    def __init__(self, width: int, height: int, window: LevelWindow, bit_depth: int = 8,
                 expected_frames: int = 0):
        self.width, self.height = int(width), int(height)
        self.window = window
        self.depth_scale = 4.0 if bit_depth > 8 else 1.0
        self.stride = max(1, int(round(min(self.width, self.height) / ANALYSIS_SHORT_SIDE)))
        rows = max(1, (self.height // self.stride) // BLOCK)
        cols = max(1, (self.width // self.stride) // BLOCK)
        self.grid = (rows, cols)
        self._block = min(BLOCK, self.height // self.stride), min(BLOCK, self.width // self.stride)
        self._prev: Optional[np.ndarray] = None
        cap = max(int(expected_frames), 16)
        self._stats = np.zeros((cap, 6), np.float32)
        self._motion = np.zeros((cap, rows * cols), np.float32)
        self._luma = np.zeros((cap, rows * cols), np.float32)
        self.count = 0
        self.thumbnails: list = []

    def _grow(self) -> None:
        cap = self._stats.shape[0] * 2
        self._stats = np.resize(self._stats, (cap, 6))
        self._motion = np.resize(self._motion, (cap, self._motion.shape[1]))
        self._luma = np.resize(self._luma, (cap, self._luma.shape[1]))

    def add(self, y: np.ndarray, chroma: tuple) -> None:
        """One frame: `y` [H, W] and its chroma planes (U and V, or NV12's interleaved UV), any 2-D views."""
        if self.count >= self._stats.shape[0]:
            self._grow()
        w = self.window
        stats = self._stats[self.count]
        y_lo, y_hi = int(y.min()), int(y.max())
        c_lo = min(int(c.min()) for c in chroma)
        c_hi = max(int(c.max()) for c in chroma)
        out = 0.0
        # Counting is only paid for frames whose extremes leave the window (a clean file never pays it).
        if y_lo < w.luma_lo or y_hi > w.luma_hi:
            out = max(out, 100.0 * np.count_nonzero((y < w.luma_lo) | (y > w.luma_hi)) / y.size)
        if c_lo < w.chroma_lo or c_hi > w.chroma_hi:
            for c in chroma:
                out = max(out, 100.0 * np.count_nonzero((c < w.chroma_lo) | (c > w.chroma_hi)) / c.size)
        rows, cols = self.grid
        bh, bw = self._block
        s = self.stride
        grid = y[: rows * bh * s: s, : cols * bw * s: s].astype(np.float32)
        if self.depth_scale != 1.0:
            grid *= 1.0 / self.depth_scale
        black = 100.0 * np.count_nonzero(grid < w.black) / grid.size
        stats[:] = (y_lo, y_hi, c_lo, c_hi, out, black)
        self._luma[self.count] = grid.reshape(rows, bh, cols, bw).mean(axis=(1, 3)).reshape(-1)
        if self._prev is not None:
            diff = np.abs(grid - self._prev)
            self._motion[self.count] = diff.reshape(rows, bh, cols, bw).mean(axis=(1, 3)).reshape(-1)
        self._prev = grid
        self.count += 1

    def add_thumbnail(self, index: int, rgb: np.ndarray) -> None:
        self.thumbnails.append((int(index), np.ascontiguousarray(rgb, dtype=np.uint8)))

    def finish(self) -> PictureMeasurements:
        n = self.count
        st = self._stats[:n]
        rows, cols = self.grid
        return PictureMeasurements(
            frames=n, width=self.width, height=self.height, grid=self.grid,
            block_px=(self._block[0] * self.stride, self._block[1] * self.stride),
            luma_min=st[:, 0].copy(), luma_max=st[:, 1].copy(), chroma_min=st[:, 2].copy(),
            chroma_max=st[:, 3].copy(), out_of_range_pct=st[:, 4].copy(), black_pct=st[:, 5].copy(),
            block_motion=self._motion[:n].copy(), block_luma=self._luma[:n].copy(), thumbnails=self.thumbnails)

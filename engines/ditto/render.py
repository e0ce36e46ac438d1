"""Render: avatar + driven keypoints -> full-size frames, in batches, as a stream of chunks.

Per rendered frame: stitching network on (x_s, x_d), warping network on the avatar frame's f_s, SPADE decoder to a
512 crop, putback into the avatar frame. Frames between rendered ones (cadence stride > 1) are SLERP-infilled crops;
frames in silence show the avatar frame, eased in and out (see cadence.py). Output frame i uses avatar frame
``source_index[i]`` (the loop is followed by video time). Chunks come out in order as soon as they are complete, so a
writer can encode them while the rest renders; nothing holds the whole clip unless the caller collects it. Pipelined
(the default), the networks run in their own thread one batch ahead of putback and the caller's encoder.

The byte path (engines/common/frames.py): a chunk is uint8 on the host, each frame the loop frame copied as bytes
with the crop's window blended in place (`putback.paste_crops`): the window is computed on the networks' device and
only its bytes cross; no full frame is ever float or sent to the device.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import torch

from ..accel.stages import threaded
from ..common.errors import InputError
from ..common.frames import FrameRing, chunk_buffer
from ..common.progress import Progress, ensure
from . import cadence
from .keypoints import source_keypoints
from .putback import BLEND_MODES, PasteWork, paste_crops


@dataclass(frozen=True)
class RenderSettings:
    batch_size: int = 4
    stride: int = 1
    silence_bypass: bool = False  # the posts' final decision: dense evaluation by default
    silence_threshold: float = cadence.SILENCE_RMS
    ease_frames: int = cadence.EASE_FRAMES
    pipelined: bool = True          # networks one batch ahead of putback, in their own thread (same frames)
    blend: str = "feather"          # putback: feather, reinhard (mouth colour transfer) or poisson (putback.py)


def _autocast(device: torch.device, dtype: torch.dtype):
    if device.type == "cuda" and dtype in (torch.float16, torch.bfloat16):
        return torch.autocast("cuda", dtype=dtype)
    if device.type == "cpu" and dtype == torch.bfloat16:    # the GPU's bf16 path, testable without a GPU
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class CropRenderer:
    """Stitch -> warp -> decode for batches of frames, on one device.

    Each network runs through its accelerated runner when the pipeline built one (``nets.runners``, which places
    inputs itself), else eagerly with its inputs cast to its weights' dtype (bf16 or fp16 weights work as fp32 do).
    """

    def __init__(self, nets, avatar, device: torch.device, dtype: torch.dtype):
        self.nets, self.avatar, self.device, self.dtype = nets, avatar, device, dtype
        self.x_s = torch.from_numpy(source_keypoints(avatar.info))          # (N_src, 21, 3)
        runners = getattr(nets, "runners", None) or {}
        self.stitch, self.warp, self.decoder = (runners.get(n) or _eager(getattr(nets, n))
                                                for n in ("stitch", "warp", "decoder"))
        self._f_s_staging: Optional[torch.Tensor] = None

    def _gather_f_s(self, src: np.ndarray) -> torch.Tensor:
        """The avatar's f_s of the batch's source frames, on the device. A batch of consecutive loop frames (the loop
        played forward, most batches) is a view of the avatar's table, no copy on the host; any other is gathered
        into one reused staging buffer. A fresh stack is 4 MB a frame (32 MB a batch of 8, past the C allocator's
        cached sizes), so its page faults came back on every call: ~2 ms a frame of the render's host time, measured
        (cProfile, bench_host_path's Ditto case). The buffer is rewritten by the next call; the networks are done
        with their inputs when a call returns."""
        f_s = self.avatar.f_s
        idx = np.asarray(src, np.int64)
        n = len(idx)
        if n and np.all(np.diff(idx) == 1):
            return f_s[int(idx[0]):int(idx[0]) + n].to(self.device)
        if self._f_s_staging is None or self._f_s_staging.shape[0] < n:
            self._f_s_staging = torch.empty((n, *f_s.shape[1:]), dtype=f_s.dtype, device=f_s.device)
        staged = torch.index_select(f_s, 0, torch.from_numpy(idx), out=self._f_s_staging[:n])
        return staged.to(self.device)

    @torch.inference_mode()
    def __call__(self, src: np.ndarray, kp_driven: np.ndarray) -> torch.Tensor:
        dev = self.device
        f_s = self._gather_f_s(src)
        x_s = self.x_s[src].to(dev)
        x_d = torch.from_numpy(np.ascontiguousarray(kp_driven)).to(dev)
        with _autocast(dev, self.dtype):
            x_d = self.stitch(x_s, x_d)
            feat = self.warp(f_s, x_s, x_d)
            crops = self.decoder(feat)
        return crops.float().clamp(0, 1)


def _eager(module):
    """Call `module` with floating inputs in its weights' dtype (the avatar stores f_s in fp16, keypoints fp32)."""
    dtype = next(module.parameters()).dtype

    def run(*xs):
        return module(*(x.to(dtype) if x.is_floating_point() else x for x in xs))
    return run


def render(nets, avatar, source_index: np.ndarray, kp_driven: np.ndarray, rms: Optional[np.ndarray],
           settings: RenderSettings, device: torch.device, dtype: torch.dtype = torch.float32,
           progress: Optional[Progress] = None, reuse_buffers: bool = False) -> Iterator[torch.Tensor]:
    """Yield frame chunks (b, H, W, 3) uint8 on the CPU, in order, until every frame is out.

    `reuse_buffers`: the chunks are two recycled buffers (`engines.common.frames.FrameRing`): a chunk is overwritten
    when the one after next is made, so the consumer must be done with it when it asks for the next (the writer,
    `collect_frames`); off, every chunk is a new tensor."""
    progress = ensure(progress)
    n = len(kp_driven)
    if not 1 <= settings.stride <= 3:
        raise InputError("cadence_stride", "1, 2 or 3", str(settings.stride))
    if settings.batch_size < 1:
        raise InputError("batch_size", "at least 1", str(settings.batch_size))
    if settings.blend not in BLEND_MODES:
        raise InputError("blend", f"one of {', '.join(BLEND_MODES)}", repr(settings.blend))
    if settings.silence_bypass and rms is not None:
        weights = cadence.neural_weights(rms[:n] if len(rms) >= n else np.pad(rms, (0, n - len(rms))),
                                         settings.silence_threshold, settings.ease_frames)
    else:
        weights = np.ones(n, np.float32)
    plan = cadence.render_plan(weights, settings.stride)
    progress.reset(n)
    renderer = CropRenderer(nets, avatar, device, dtype)
    rendered: dict[int, torch.Tensor] = {}
    emitted = 0
    ring = FrameRing(2) if reuse_buffers else None     # the chunk the consumer holds + the one being made
    shape = tuple(avatar.frames.shape[1:])
    paste_work = PasteWork()                            # the paste's window buffers, reused for the whole clip

    def emit(upto: int):
        """Put back and yield frames [emitted, upto)."""
        nonlocal emitted
        while emitted < upto:
            idx = np.arange(emitted, min(upto, emitted + settings.batch_size))
            out = chunk_buffer(ring, len(idx), shape)
            for j, i in enumerate(idx):
                out[j].copy_(avatar.frames[int(source_index[i])])
            active = weights[idx] > 0
            if active.any():
                sel = idx[active]
                crops = [_crop_for(i) for i in sel]          # no stack: the warp copies each into its input
                src = source_index[sel]
                paste_crops([out[j] for j in np.flatnonzero(active)], crops, avatar.m_o2c[src], avatar.m_c2o[src],
                            settings.blend, weights[sel], paste_work)
            yield out
            progress.step(len(idx))
            emitted = int(idx[-1]) + 1

    def _crop_for(i: int) -> torch.Tensor:
        if i in rendered:
            return rendered[i]
        k = np.searchsorted(plan, i)
        a, b = int(plan[k - 1]), int(plan[k])
        return cadence.slerp(rendered[a][None], rendered[b][None], (i - a) / (b - a))[0]

    def _put_back(batch, crops):
        for j, i in enumerate(batch):
            rendered[int(i)] = crops[j]
        yield from emit(int(batch[-1]) + 1)
        keep_from = int(batch[-1])
        for key in [k for k in rendered if k < keep_from]:
            del rendered[key]

    def crop_batches():
        """The networks' stage: (plan batch, its crops), one batch ahead of putback when pipelined."""
        for s in range(0, len(plan), settings.batch_size):
            batch = plan[s:s + settings.batch_size]
            yield batch, renderer(source_index[batch], kp_driven[batch])

    batches = threaded(crop_batches(), name="ditto-networks") if settings.pipelined else crop_batches()
    try:
        for batch, crops in batches:
            progress.check()
            yield from _put_back(batch, crops)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()                     # a cancel or a closed consumer stops the networks' thread too
    yield from emit(n)

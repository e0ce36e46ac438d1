"""Lip-sync: an avatar loop + speech -> frames whose mouth follows the speech.

Stages, streamed in batches so a long clip never needs every latent or decoded face at once:
1. audio -> 16 kHz mono -> Whisper hidden states in 30 s segments -> padded ``[S, 5, 384]`` (audio_features);
2. keyframes (every `stride`-th frame and the last): one gather of their audio windows ``[B, 50, 384]`` + the
   positional encoding, the loop frame's 8-channel latent chosen by video time, one UNet step at timestep 0;
3. frames between keyframes: SLERP of the keyframe latents (cadence);
4. VAE decode in batches, then paste-back of the mouth onto the loop frame at its crop box (blend). The byte path
   (engines/common/frames.py): each output frame is the uint8 loop frame copied, with the mouth window blended in
   place; only that window is float, computed where the faces were decoded (only its bytes cross to the host), and
   rounded as the export rounds. The chunks are uint8; `lipsync` (the IMAGE edge) turns them into float once.
With the viseme cache on (viseme.py), a keyframe whose audio window repeats reuses the mouth made for the first one
(its latent and its decoded mouth window): no UNet row and no VAE decode; only the misses fill the batches.
Every network call runs at a fixed batch size: a short last batch is padded with copies of its last item and the
extra outputs dropped, so there is one code path (and one shape for compiled or graph-captured runners).
The UNet (2-3), VAE decode (4a) and paste-back (4b) are generators; pipelined (the default) each runs on its own
worker thread (long-lived, reused clip after clip) behind a bounded queue, overlapping each other and the caller's
encoder at flat memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional

import torch

from ..accel.stages import threaded, timing
from ..common.blend_modes import MODES as BLEND_MODES
from ..common.errors import InputError
from ..common.frames import FrameRing, chunk_buffer, collect_frames, frame_bytes
from ..common.loop_modes import loop_mode_name
from ..common.progress import Progress, ensure
from .audio_features import (TOKENS, WINDOW_STEPS, encode_audio, pad_features, positional_encoding, prepare_audio,
                             window_features, window_means, window_starts)
from .avatar import Avatar
from .blend import CROP, MouthPaster, source_indices
from .cadence import (VELOCITY_THRESHOLD, adaptive_keyframe_indices, expand_keyframes, keyframe_indices,
                      window_velocity)
from .viseme import DEFAULT_CAPACITY, MAX_CAPACITY, MAX_THRESHOLD, OFF, CachedMouth, VisemeCache, exact_key, simhash

STRIDE_MODES = ("fixed", "adaptive")
MAX_STRIDE = 8
HIT_RUN = 4          # viseme hits queued behind a pending miss: at most this many batches before the UNet runs


@dataclass(frozen=True)
class LipSyncSettings:
    """batch_size: frames per UNet/VAE call; stride: UNet on every stride-th frame (1 = all); fps: output rate
    (None = the avatar's); loop_mode: how the avatar loop repeats (`engines.common.loop_modes`: "mirror",
    "ping-pong" or "wrap"; the node's default is "mirror", upstream's order, and this engine default stays "wrap"
    so a caller that names nothing gets the plain cycle). stride_mode "adaptive": `stride` is the spacing on fast
    articulation and `max_stride` the spacing where every frame of the span moves slower than `velocity_threshold`
    (`cadence.adaptive_keyframe_indices`)."""

    batch_size: int = 8
    stride: int = 1
    fps: Optional[float] = None
    loop_mode: str = "wrap"
    blend: str = "feather"   # paste-back: feather, reinhard or poisson (engines/common/blend_modes.py)
    stride_mode: str = "fixed"
    max_stride: int = 4
    velocity_threshold: float = VELOCITY_THRESHOLD
    pipelined: bool = True   # the UNet, VAE decode and paste-back overlapped, each in its own thread (same frames)
    viseme_threshold: int = OFF        # viseme cache: -1 off, 0 exact, 1..32 SimHash Hamming bits (engines/.../viseme)
    viseme_cache_size: int = DEFAULT_CAPACITY   # the most mouths it keeps (least recently used dropped first)


@dataclass
class LipSyncStats:
    """What one run did, filled in as it renders: frames, frames run through the UNet, frames VAE-decoded, the
    network calls, and (with a viseme cache) keyframes reused and the cache's own summary."""

    frames: int = 0
    unet_frames: int = 0
    decoded_frames: int = 0
    unet_calls: int = 0
    vae_calls: int = 0
    keyframes: int = 0
    viseme_hits: int = 0
    viseme: str = ""             # VisemeCache.summary() when the cache was on
    batch: int = 0
    stage_seconds: dict = field(default_factory=dict)   # seconds spent in each stage's work ("unet", "vae", ...)

    def saved_seconds(self) -> float:
        """Estimated UNet + VAE time the viseme cache saved: the calls it made unnecessary times this run's mean
        time per call (a fixed-size batch costs the same however many of its rows are real)."""
        if not self.batch:
            return 0.0
        est = 0.0
        for stage, calls, rows in (("unet", self.unet_calls, self.keyframes), ("vae", self.vae_calls, self.frames)):
            without = -(-rows // self.batch)
            if calls:
                est += max(0, without - calls) * self.stage_seconds.get(stage, 0.0) / calls
        return est

    def summary(self) -> str:
        text = (f"{self.frames} frames, {self.unet_frames} through the UNet "
                f"(mean stride {self.frames / max(1, self.unet_frames):.2f}), {self.decoded_frames} VAE-decoded")
        if self.viseme:
            text += (f"; {self.viseme}; {self.unet_calls} UNet and {self.vae_calls} VAE calls, "
                     f"about {self.saved_seconds():.1f} s saved")
        return text


def run_padded(fn: Callable[..., torch.Tensor], batch: int, *xs: torch.Tensor) -> torch.Tensor:
    """Call `fn` on exactly `batch` rows: pad short inputs with copies of their last row, drop the extra outputs."""
    m = xs[0].shape[0]
    if m < batch:
        xs = tuple(torch.cat([x, x[-1:].expand(batch - m, *x.shape[1:])], dim=0) for x in xs)
    return fn(*xs)[:m]


def check_settings(settings: LipSyncSettings) -> None:
    if not 1 <= settings.batch_size <= 256:
        raise InputError("batch_size", "a batch size from 1 to 256", str(settings.batch_size))
    if not 1 <= settings.stride <= 3:
        raise InputError("stride", "a keyframe stride of 1, 2 or 3", str(settings.stride))
    if settings.fps is not None and not settings.fps > 0:
        raise InputError("fps", "a positive frame rate (or 0 for the avatar's)", str(settings.fps))
    loop_mode_name(settings.loop_mode)
    if settings.blend not in BLEND_MODES:
        raise InputError("blend", f"one of {', '.join(BLEND_MODES)}", repr(settings.blend))
    if settings.stride_mode not in STRIDE_MODES:
        raise InputError("stride_mode", " or ".join(STRIDE_MODES), repr(settings.stride_mode))
    if settings.stride_mode == "adaptive":
        if not settings.stride <= settings.max_stride <= MAX_STRIDE:
            raise InputError("max_stride", f"a stride from stride ({settings.stride}) to {MAX_STRIDE}",
                             str(settings.max_stride))
        if not settings.velocity_threshold >= 0:
            raise InputError("velocity_threshold", "a velocity of 0 or more", str(settings.velocity_threshold))
    if not OFF <= settings.viseme_threshold <= MAX_THRESHOLD:
        raise InputError("viseme_threshold", f"-1 (off), 0 (exact) or a Hamming distance up to {MAX_THRESHOLD}",
                         str(settings.viseme_threshold))
    if not 1 <= settings.viseme_cache_size <= MAX_CAPACITY:
        raise InputError("viseme_cache_size", f"a number of mouths from 1 to {MAX_CAPACITY}",
                         str(settings.viseme_cache_size))


def choose_keyframes(padded: torch.Tensor, n: int, fps: float, settings: LipSyncSettings) -> torch.Tensor:
    """The frames the UNet evaluates: every `stride`-th (fixed) or spaced by the audio's velocity (adaptive)."""
    if settings.stride_mode == "fixed":
        return keyframe_indices(n, settings.stride)
    velocity = window_velocity(window_means(padded, n, fps))
    return adaptive_keyframe_indices(velocity, settings.stride, settings.max_stride, settings.velocity_threshold)


def _viseme_keys(cache: Optional[VisemeCache], padded, src, n, fps) -> Optional[Callable[[int], Any]]:
    """The viseme cache's key of a keyframe (exact: window bytes + loop frame; fuzzy: SimHash bits), or None."""
    if cache is None:
        return None
    if cache.exact:
        starts = window_starts(n, fps)
        return lambda f: exact_key(padded, int(starts[f]), WINDOW_STEPS, int(src[f]))
    bits = simhash(window_means(padded, n, fps))
    return lambda f: bits[f]


def _keyframes(nets, avatar: Avatar, padded, keys, src, fps, batch, device, dtype, times,
               stats: "LipSyncStats", cache: Optional[VisemeCache] = None) -> Iterator[tuple]:
    """Stage 2-3: the UNet on keyframe batches, SLERP for the frames between -> (frame ids, latents, keys done,
    viseme marks: per frame None, or ("store" | "use", cached mouth) for a keyframe the cache made or reused).

    With a viseme cache, keyframes that hit skip the UNet: only the misses fill the fixed-size UNet batches, so a
    hit saves a row of real work. Without one (or with no hits) the batches are the plain ``keys.split(batch)``.
    """
    timestep = torch.zeros(1, dtype=torch.long, device=device)
    pe = positional_encoding(TOKENS, padded.shape[-1], device, dtype)
    unet = (getattr(nets, "runners", None) or {}).get("unet")       # an accelerated backend (engines/accel)
    if unet is None:
        unet = lambda lat, cond: nets.unet(lat, timestep, encoder_hidden_states=cond).sample  # noqa: E731
    key_of = _viseme_keys(cache, padded, src, src.numel(), fps)
    prev_lat, prev_idx, next_frame = None, None, 0
    pending: list = []          # [frame, mouth, hit] in keyframe order, waiting for the UNet
    misses = 0

    def run():
        """The UNet on the pending misses (one padded batch) -> the pending keyframes' latents ``[k, 4, 32, 32]``."""
        miss = [p for p in pending if not p[2]]
        pred = None
        if miss:
            kb = torch.tensor([p[0] for p in miss], dtype=torch.long)
            lat_in = avatar.latents[src[kb]].to(device, dtype)
            cond = window_features(padded, kb, fps).to(device, dtype) + pe
            pred = run_padded(unet, batch, lat_in, cond).float()
            stats.unet_frames += len(miss)
            stats.unet_calls += 1
            if cache is not None:
                for j, p in enumerate(miss):
                    p[1].latent = pred[j].clone()      # not a view: a kept mouth must not hold its whole batch
        if len(miss) == len(pending):
            return pred                                     # no hits: the batch itself, as without a cache
        return torch.stack([p[1].latent for p in pending])

    def emit():
        nonlocal prev_lat, prev_idx, next_frame, misses
        with timing(times, "unet"):
            pred = run()
            kb = torch.tensor([p[0] for p in pending], dtype=torch.long)
            key_lat = pred if prev_lat is None else torch.cat([prev_lat, pred])
            key_idx = kb if prev_idx is None else torch.cat([prev_idx, kb])
            frames = torch.arange(next_frame, int(kb[-1]) + 1)
            latents = expand_keyframes(key_lat, key_idx, frames)
        marks = None
        if cache is not None:
            marks = [None] * frames.numel()
            for f, mouth, hit in pending:
                marks[f - next_frame] = ("use" if hit else "store", mouth)
        done = len(pending)
        prev_lat, prev_idx, next_frame = pred[-1:], kb[-1:], int(kb[-1]) + 1
        pending.clear()
        misses = 0
        return frames, latents, done, marks

    for f in keys.tolist():
        mouth, hit = None, False
        if key_of is not None:
            key = key_of(f)
            mouth = cache.lookup(key)
            hit = mouth is not None
            if not hit:
                mouth = CachedMouth(frame=f)
                cache.insert(key, mouth)
        stats.viseme_hits += hit
        misses += not hit
        pending.append([f, mouth if mouth is not None else CachedMouth(frame=f), hit])
        # A full batch of misses runs; hits with no miss before them go on at once; a long run of hits behind a
        # miss waits at most HIT_RUN batches (bounded memory).
        if misses == batch or misses == 0 or len(pending) >= HIT_RUN * batch:
            yield emit()
    if pending:
        yield emit()


def _reused(mark) -> bool:
    return mark is not None and mark[0] == "use"


def _decoded(nets, items: Iterable[tuple], batch: int, out_device, times,
             window: tuple = (0, 0, 0, 0), stats: Optional["LipSyncStats"] = None) -> Iterator[tuple]:
    """Stage 4a: VAE decode in fixed batches -> (frame ids, faces [k, 3, 256, 256] as the VAE gives them (-1..1),
    keys done).

    A keyframe the viseme cache reused is not decoded: its face is the cached window (`window`, the crop rows and
    columns the paste-back reads) of the face decoded for the keyframe that made it, which precedes it; a keyframe
    that made a cache entry leaves its decoded window there.
    """
    decode = (getattr(nets, "runners", None) or {}).get("vae_decode")
    if decode is None:
        decode = lambda z: nets.vae.decode(z.to(nets.vae.dtype) / nets.scaling_factor).sample  # noqa: E731
    r0, r1, c0, c1 = window
    lats, ids, marks, count, keys = [], [], [], 0, 0    # per frame, in order; `count` = frames needing a decode

    def take(k):
        """Decode the first `k` frames that need it; return them with the reused frames between (in order)."""
        nonlocal lats, ids, marks, count, keys
        with timing(times, "vae"):
            need = [j for j, m in enumerate(marks) if not _reused(m)][:k]
            upto = need[-1] + 1 if need else len(marks)
            faces = None
            if need:
                faces = run_padded(decode, batch, torch.stack([lats[j] for j in need]).to(nets.vae.device))
                faces = faces.to(out_device)     # as decoded (-1..1): the paste brings its window, only, to 0..1
                if stats is not None:
                    stats.decoded_frames += len(need)
                    stats.vae_calls += 1
            if len(need) < upto:                          # reused faces among them: place the decoded ones
                full = torch.zeros((upto, 3, CROP, CROP), dtype=torch.float32, device=out_device)
                if need:
                    full[torch.tensor(need, dtype=torch.long, device=out_device)] = faces
                faces = full
            for j, m in enumerate(marks[:upto]):
                if m is not None and m[0] == "store":
                    m[1].window = faces[j, :, r0:r1, c0:c1].clone()
                elif m is not None:                       # its maker came earlier: decoded and stored by now
                    faces[j, :, r0:r1, c0:c1] = m[1].window
            fr = torch.tensor(ids[:upto], dtype=torch.long)
            lats, ids, marks = lats[upto:], ids[upto:], marks[upto:]
            count -= len(need)
        done, keys = keys, 0
        return fr, faces, done

    for item in items:
        frames, latents, nkeys = item[:3]
        frame_marks = item[3] if len(item) > 3 and item[3] is not None else [None] * frames.numel()
        lats.extend(latents.unbind(0))
        ids.extend(frames.tolist())
        marks.extend(frame_marks)
        count += sum(1 for m in frame_marks if not _reused(m))
        keys += nkeys
        while count >= batch:
            yield take(batch)
        if marks and count == 0:                           # only reused faces waiting: nothing to decode
            yield take(0)
    while marks:
        yield take(min(count, batch))


PASTE_DEPTH = 2    # chunks the threaded paste stage may finish ahead of its consumer (engines/accel/stages.threaded)


def _pasted(avatar: Avatar, src, items: Iterable[tuple], times, blend: str = "feather",
            stats: Optional["LipSyncStats"] = None, ring: Optional[FrameRing] = None) -> Iterator[tuple]:
    """Stage 4b: each face pasted onto its loop frame -> (frame count, uint8 frames [k, H, W, 3], keys done).

    The loop frame is copied as bytes and the mouth window blended into the copy in place, on the faces' device
    (`MouthPaster.paste`); with a `ring` the chunks are its reused buffers."""
    paster = MouthPaster(avatar.mask, blend)
    frames = avatar.frames
    shape = tuple(frames.shape[1:])
    boxes = avatar.boxes.tolist()
    for fr, faces, nkeys in items:
        with timing(times, "paste"):
            out = chunk_buffer(ring, len(fr), shape)
            for j, f in enumerate(fr.tolist()):
                s = int(src[f])
                out[j].copy_(frame_bytes(frames, s))
                paster.paste(out[j], faces[j], boxes[s], vae_range=True)
        if stats is not None:
            stats.frames += len(fr)
        yield len(fr), out, nkeys


def frame_count(audio: Any, settings: LipSyncSettings, avatar: Avatar) -> int:
    """How many frames `lipsync_chunks` yields for this speech: ``floor(duration · fps)``."""
    return prepare_audio(audio, float(settings.fps or avatar.fps))[1]


@torch.no_grad()   # torch applies it around each resume of the generator, not across the caller's code
def lipsync_chunks(nets, avatar: Avatar, audio: Any, settings: LipSyncSettings = LipSyncSettings(),
                   device: Optional[torch.device] = None, progress: Optional[Progress] = None,
                   stats: Optional[LipSyncStats] = None, stage_times: Optional[dict] = None,
                   reuse_buffers: bool = False) -> Iterator[torch.Tensor]:
    """Render the lip-synced clip as a generator of uint8 frame chunks ``[b, H, W, 3]`` (on the CPU), in order,
    ``floor(duration · fps)`` frames in all: only a bounded number of batches exists at a time (feed it to
    `write_stream`).

    `reuse_buffers`: the chunks are a few recycled buffers (`engines.common.frames.FrameRing`), each overwritten a
    few chunks later: for a consumer done with a chunk when it asks for the next (the writer, `collect_frames`);
    off, every chunk is a new tensor the caller may keep.

    `device`: None = where the UNet's weights are. ``settings.pipelined``: the UNet, VAE-decode and paste-back stages
    run overlapped (engines/accel/stages.py) while the caller consumes chunks; same frames either way.
    `stats`, when given, is filled in as the frames are rendered; `stage_times` collects each stage's seconds.
    """
    check_settings(settings)
    stats = stats if stats is not None else LipSyncStats()
    if stage_times is None:
        stage_times = stats.stage_seconds
    else:
        stats.stage_seconds = stage_times           # the caller's dict: the summary's estimate reads it too
    progress = ensure(progress)
    device = torch.device(device) if device is not None else next(nets.unet.parameters()).device  # follow weights
    fps = float(settings.fps or avatar.fps)
    samples, n = prepare_audio(audio, fps)
    dtype = nets.compute_dtype
    with timing(stage_times, "audio"):
        features = encode_audio(nets.whisper, nets.feature_extractor, samples, device, dtype, progress)
        padded = pad_features(features, n, fps)          # stays on the CPU: only each batch's windows move
    src = source_indices(n, fps, avatar.fps, len(avatar), settings.loop_mode)
    keys = choose_keyframes(padded, n, fps, settings)
    batch = settings.batch_size
    progress.reset(len(keys) + n)
    stats.keyframes, stats.batch = len(keys), batch
    cache, window = None, (0, 0, 0, 0)
    if settings.viseme_threshold != OFF:
        cache = VisemeCache(settings.viseme_threshold, settings.viseme_cache_size)
        sizes = {(int(y2 - y1), int(x2 - x1)) for x1, y1, x2, y2 in avatar.boxes.tolist()}
        window = MouthPaster(avatar.mask).read_window(sizes)
    stage = threaded if settings.pipelined else (lambda it, **_: it)
    chain = stage(_keyframes(nets, avatar, padded, keys, src, fps, batch, device, dtype, stage_times, stats, cache),
                  name="unet")
    # Faces stay where the VAE decoded them: the paste computes each mouth window there and only bytes come back.
    chain = stage(_decoded(nets, chain, batch, device, stage_times, window, stats), name="vae")
    # the chunks a threaded paste stage holds ahead (pipelined), the one being written and the consumer's
    ring = FrameRing((PASTE_DEPTH if settings.pipelined else 0) + 2) if reuse_buffers else None
    chain = stage(_pasted(avatar, src, chain, stage_times, settings.blend, stats, ring), name="paste",
                  depth=PASTE_DEPTH)
    try:
        for count, chunk, nkeys in chain:
            progress.step(count + nkeys)       # on the caller's thread (ComfyUI's bar and cancel check)
            yield chunk
        if cache is not None:
            stats.viseme = cache.summary()
    finally:
        close = getattr(chain, "close", None)
        if close is not None:
            close()                            # a cancel or a closed consumer stops every stage before returning


def lipsync(nets, avatar: Avatar, audio: Any, settings: LipSyncSettings = LipSyncSettings(),
            device: Optional[torch.device] = None, progress: Optional[Progress] = None,
            stats: Optional[LipSyncStats] = None) -> torch.Tensor:
    """The whole lip-synced clip as a ComfyUI IMAGE ``[N, H, W, 3]`` float32 0-1: the uint8 chunks of
    `lipsync_chunks` converted once, into one preallocated tensor."""
    n = frame_count(audio, settings, avatar)
    return collect_frames(lipsync_chunks(nets, avatar, audio, settings, device, progress, stats, reuse_buffers=True),
                          n, tuple(avatar.frames.shape[1:]), torch.float32)

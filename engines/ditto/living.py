"""A living face: natural blinks and small gaze saccades, each switchable and seeded.

Blinks. People blink about 15-20 times a minute at irregular intervals, never twice within a fraction of a second;
a fixed template at fixed (or uniformly random 60-100 frame) gaps looks mechanical. Blink onsets here are a Poisson
process with a refractory gap (dead time): inter-blink intervals are ``refractory + Exponential(mean - refractory)``,
so the mean rate is kept and no two blinks come closer than the gap. Each blink plays upstream's blink template
(``delta_eye_arr``) stretched by a random factor (0.8-1.25: short and long blinks). A blink is never placed on or
next to a source frame whose eyes are already closed (a loop that blinks by itself): such a blink is moved past the
closed frames, keeping the refractory gap from them too.

Saccades. Gaze holds still for a while (fixation, exponential, mean ``fixation_s``) and then jumps, within two
frames, to a new small offset around the centre (gaussian, ``amplitude`` in the gaze expression units upstream's
gaze correction uses), returning to centre more often than not. Offsets are written into the same expression
dimensions as upstream's gaze correction (left/right eye x at 33/45, y at 34/46). None during a closed-eye source
frame or a blink (the eyes are shut: a moving gaze would show through the lids).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GAZE_X_DIMS, GAZE_Y_DIMS = (33, 45), (34, 46)


@dataclass(frozen=True)
class LivingSettings:
    blinks: bool = True
    blinks_per_minute: float = 17.0
    refractory_s: float = 1.0
    saccades: bool = True
    fixation_s: float = 1.2
    amplitude: float = 0.004
    seed: int = 0


def closed_source_frames(eye_open: np.ndarray, ratio: float = 0.6) -> np.ndarray:
    """Per source frame: are its eyes closed? Openness (mean of both eyes) under `ratio` x the clip's median."""
    openness = np.asarray(eye_open, np.float64).reshape(len(eye_open), -1).mean(axis=1)
    median = np.median(openness)
    return openness < ratio * median if median > 0 else np.zeros(len(openness), bool)


def blink_onsets(n: int, fps: float, template_len: int, settings: LivingSettings,
                 closed: np.ndarray = None, rng: np.random.Generator = None) -> list:
    """(start frame, length in frames) of every blink in `n` frames; see the module docstring."""
    rng = rng or np.random.default_rng(settings.seed)
    if not settings.blinks or template_len <= 0 or n <= 0:
        return []
    mean = 60.0 / max(settings.blinks_per_minute, 1e-3)
    gap = min(settings.refractory_s, 0.9 * mean)
    closed = np.zeros(n, bool) if closed is None else np.asarray(closed, bool)
    dead = int(round(gap * fps))
    blocked = np.convolve(closed.astype(np.int32), np.ones(2 * dead + 1, np.int32), mode="same") > 0
    out = []
    t = gap + rng.exponential(mean - gap)  # the first blink: as if the last one was just before the clip
    while True:
        start = int(round(t * fps))
        length = max(2, int(round(template_len * rng.uniform(0.8, 1.25))))
        if start + length > n:
            break
        window = blocked[start:start + length]
        if window.any():  # on or near a closed-eye source frame: after it, keeping the gap
            after = start + int(np.flatnonzero(window)[-1]) + 1
            free = np.flatnonzero(~blocked[after:])
            if free.size == 0:
                break
            t = (after + int(free[0])) / fps
            continue
        out.append((start, length))
        t = (start + length) / fps + gap + rng.exponential(mean - gap)
    return out


def blink_track(n: int, onsets: list, template: np.ndarray) -> np.ndarray:
    """(n, 63) expression offsets of the blinks: the template, stretched to each blink's length."""
    template = np.asarray(template, np.float32).reshape(len(template), -1)
    track = np.zeros((n, template.shape[1]), np.float32)
    src = np.linspace(0.0, 1.0, len(template))
    for start, length in onsets:
        pos = np.linspace(0.0, 1.0, length)
        for d in range(template.shape[1]):
            track[start:start + length, d] = np.interp(pos, src, template[:, d])
    return track


def saccade_track(n: int, fps: float, settings: LivingSettings, quiet: np.ndarray = None,
                  rng: np.random.Generator = None) -> np.ndarray:
    """(n, 2) gaze offsets (x, y); jumps take two frames, no jump starts inside `quiet` frames."""
    rng = rng or np.random.default_rng(settings.seed + 1)
    gaze = np.zeros((n, 2), np.float32)
    if not settings.saccades or n <= 0:
        return gaze
    quiet = np.zeros(n, bool) if quiet is None else np.asarray(quiet, bool)
    current = np.zeros(2, np.float32)
    frame = 0
    while frame < n:
        hold = max(2, int(round(rng.exponential(settings.fixation_s) * fps)))
        gaze[frame:frame + hold] = current
        frame += hold
        if frame >= n:
            break
        while frame < n and quiet[frame]:  # eyes shut: keep the gaze where it was
            gaze[frame] = current
            frame += 1
        target = np.zeros(2, np.float32) if rng.random() < 0.4 else \
            rng.normal(0.0, settings.amplitude, 2).astype(np.float32) * np.array([1.0, 0.5], np.float32)
        mid = (current + target) / 2
        for k, value in enumerate((mid, target)):  # a saccade is fast: two frames
            if frame + k < n:
                gaze[frame + k] = value
        frame += 2
        current = target
    return gaze


def apply_gaze(exp: np.ndarray, gaze: np.ndarray) -> np.ndarray:
    """Add the (x, y) gaze offsets to both eyes' gaze dimensions of (n, 63) expression rows."""
    exp = exp.copy()
    for d in GAZE_X_DIMS:
        exp[:, d] += gaze[:, 0]
    for d in GAZE_Y_DIMS:
        exp[:, d] += gaze[:, 1]
    return exp


def living_offsets(n: int, fps: float, template, source_closed: np.ndarray,
                   settings: LivingSettings) -> tuple[np.ndarray, np.ndarray, list]:
    """(blink expression offsets (n, 63), gaze offsets (n, 2), blink onsets) for `n` output frames.

    ``source_closed[i]`` says whether output frame i shows a closed-eye source frame.
    """
    rng = np.random.default_rng(settings.seed)
    template = np.zeros((0, 63), np.float32) if template is None else np.asarray(template, np.float32)
    onsets = blink_onsets(n, fps, len(template), settings, source_closed, rng)
    blinks = blink_track(n, onsets, template) if len(template) else np.zeros((n, 63), np.float32)
    shut = np.asarray(source_closed, bool).copy()
    for start, length in onsets:
        shut[start:start + length] = True
    gaze = saccade_track(n, fps, settings, shut, np.random.default_rng(settings.seed + 1))
    return blinks, gaze, onsets

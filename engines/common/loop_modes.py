"""How an avatar loop is walked when the speech is longer than the loop: one vocabulary for MuseTalk and Ditto.

Each name is one sequence (shown for a loop of 3 frames):

- ``mirror``: the loop, then the loop reversed, so each end frame is shown twice (``0 1 2 2 1 0 0 1 2``, period
  ``2L``). This is upstream's cycle in both families: MuseTalk builds ``frame_list + frame_list[::-1]`` and indexes
  it modulo its length (scripts/realtime_inference.py, ``Avatar.prepare_material``/``process_frames``), Ditto
  mirrors its source video the same way;
- ``ping-pong``: forward then backward turning on the end frame, each end shown once (``0 1 2 1 0 1 2``, period
  ``2L - 2``): no frame held at the turn;
- ``wrap``: restart at the first frame (for a loop made to be seamless).

Older saved values still load (`loop_mode_name`): MuseTalk's ``loop`` is ``wrap`` (its ``ping-pong`` always turned
on the end frame, so it keeps its meaning). Ditto's ``ping-pong`` always showed the end frames twice, so in Ditto it
is ``mirror`` (`DITTO_LEGACY_LOOP_MODES`); Ditto offers ``mirror`` and ``wrap`` only, so that no saved Ditto value
changes meaning.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from .errors import InputError

LOOP_MODES = ("mirror", "ping-pong", "wrap")
LEGACY_LOOP_MODES = {"loop": "wrap"}
DITTO_LOOP_MODES = ("mirror", "wrap")
DITTO_LEGACY_LOOP_MODES = {"ping-pong": "mirror", "loop": "wrap"}


def loop_mode_name(value: str, input_name: str = "loop_mode", modes: Sequence[str] = LOOP_MODES,
                   legacy: Mapping[str, str] = LEGACY_LOOP_MODES) -> str:
    """`value` in `modes` (older saved values mapped through `legacy`); anything else is an `InputError`."""
    name = legacy.get(value, value)
    if name not in modes:
        raise InputError(input_name, f"one of {', '.join(modes)}", repr(value))
    return name


def loop_index(i, length: int, mode: str):
    """Loop frame for each position `i` (a numpy or torch integer array) in a loop of `length` frames."""
    mode = loop_mode_name(mode)
    if length < 2:
        return i * 0
    if mode == "wrap":
        return i % length
    period = 2 * length if mode == "mirror" else 2 * length - 2
    j = i % period
    back = period - 1 - j if mode == "mirror" else period - j
    where = torch.where if isinstance(j, torch.Tensor) else np.where
    return where(j < length, j, back)

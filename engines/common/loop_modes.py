"""How an avatar loop is walked when the speech is longer than the loop: one vocabulary for MuseTalk and Ditto.

- ``ping-pong``: forward, then backward, then forward... (no jump at the loop's end: the usual choice for an
  action loop that does not end where it starts);
- ``wrap``: restart at the first frame (for a loop made to be seamless).

Earlier releases named these ``loop``/``ping-pong`` (MuseTalk) and ``mirror``/``wrap`` (Ditto); saved workflows
with those values still load (`loop_mode_name`). The two families turn round differently, each as its upstream
does and as their parity tests pin: Ditto shows each end frame twice (``0 1 2 2 1 0 0 1``), MuseTalk once
(``0 1 2 1 0 1``); that is `hold_ends`.
"""
from __future__ import annotations

import numpy as np
import torch

from .errors import InputError

LOOP_MODES = ("ping-pong", "wrap")
LEGACY_LOOP_MODES = {"loop": "wrap", "mirror": "ping-pong"}


def loop_mode_name(value: str, input_name: str = "loop_mode") -> str:
    """`value` in the shared vocabulary (older saved values mapped); anything else is an `InputError`."""
    name = LEGACY_LOOP_MODES.get(value, value)
    if name not in LOOP_MODES:
        raise InputError(input_name, f"one of {', '.join(LOOP_MODES)}", repr(value))
    return name


def loop_index(i, length: int, mode: str, hold_ends: bool):
    """Loop frame for each position `i` (a numpy or torch integer array) in a loop of `length` frames."""
    mode = loop_mode_name(mode)
    if length < 2:
        return i * 0
    if mode == "wrap":
        return i % length
    period = 2 * length if hold_ends else 2 * length - 2
    j = i % period
    back = period - 1 - j if hold_ends else period - j
    where = torch.where if isinstance(j, torch.Tensor) else np.where
    return where(j < length, j, back)

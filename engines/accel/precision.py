"""Precision names of torch dtypes, in the pack's one vocabulary (engines/common/precision.py)."""
from __future__ import annotations

import torch

from ..common.precision import DTYPES

NAMES = {v: k for k, v in DTYPES.items()}


def name_of(dtype: torch.dtype) -> str:
    return NAMES[dtype]

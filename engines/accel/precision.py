"""The precision vocabulary of the accelerated layer: ``fp32 | fp16 | bf16`` <-> torch dtypes."""
from __future__ import annotations

import torch

from ..common.errors import InputError

PRECISIONS = ("fp32", "fp16", "bf16")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
NAMES = {v: k for k, v in DTYPES.items()}


def dtype_of(precision: str, input_name: str = "precision") -> torch.dtype:
    try:
        return DTYPES[precision]
    except KeyError:
        raise InputError(input_name, f"one of {', '.join(PRECISIONS)}", repr(precision)) from None


def name_of(dtype: torch.dtype) -> str:
    return NAMES[dtype]

"""The pack's precision vocabulary: ``auto``, ``fp32``, ``fp16``, ``bf16`` (one spelling everywhere).

``auto`` has one policy, `auto_precision`: on a GPU bf16 where it runs well (same range as fp32, no overflow in
long sums), else fp16 where that runs well, else fp32; on the CPU fp32 (half-precision matmuls are slow or missing
there). What "runs well" is comes from ComfyUI's model management at the node layer (`nodes.inputs`), from torch
when an engine is used on its own. SAM3's loader once offered ``float32/float16/bfloat16``: those saved values
still load.
"""
from __future__ import annotations

import torch

from .errors import InputError

PRECISIONS = ("auto", "fp32", "fp16", "bf16")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LEGACY_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def precision_name(value: str, input_name: str = "precision") -> str:
    """`value` in the pack's vocabulary (older spellings mapped); anything else is an `InputError`."""
    name = LEGACY_NAMES.get(value, value)
    if name not in PRECISIONS:
        raise InputError(input_name, f"one of {', '.join(PRECISIONS)}", repr(value))
    return name


def auto_precision(device: torch.device, bf16_ok: bool, fp16_ok: bool) -> str:
    """The one "auto" policy (see the module docstring)."""
    if torch.device(device).type == "cpu":
        return "fp32"
    if bf16_ok:
        return "bf16"
    return "fp16" if fp16_ok else "fp32"


def torch_auto_precision(device: torch.device) -> str:
    """`auto_precision` with torch's own view of the device (engines used without ComfyUI)."""
    device = torch.device(device)
    if device.type != "cuda":
        return auto_precision(device, False, False)
    return auto_precision(device, torch.cuda.is_bf16_supported(), True)


def dtype_for(name: str) -> torch.dtype:
    """The torch dtype of a concrete precision name (not ``auto``)."""
    return DTYPES[precision_name(name)]

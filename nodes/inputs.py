"""Node-layer input helpers: the one `validate_inputs` format, combo checks, IMAGE batches and precision.

- `validate(...)` is what every `validate_inputs` returns: True, or the first problem as an `InputError` message
  (``"<input>: expected <what>, got <value>."``), the same text `execute` would raise, so the user reads one format
  whether ComfyUI refuses the prompt when it is queued or the node fails when it runs.
- `choice(name, value, options)` is a combo check with the guard every combo needs: ``None`` (the input is
  linked, so its value is not known when the prompt is queued) passes and is checked when it arrives. Older saved
  values (``legacy``) still load.
- IMAGE batches: `engines.common.images.check_image_batch` (the same check engines use).
- `resolve_precision(...)` / `resolve_dtype(...)` resolve ``auto|fp32|fp16|bf16`` with the pack's one auto policy
  (`auto_precision`).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Union

import torch

from ..engines.common.errors import InputError
from ..engines.common.precision import PRECISIONS, LEGACY_NAMES, dtype_for, precision_name
from ..engines.common.precision import auto_precision as policy

Check = Union[Callable[[], Any], tuple]


def choice(input_name: str, value: Any, options: Sequence[str], legacy: Optional[Mapping[str, str]] = None) -> None:
    """Refuse a combo value that is not one of `options` (nor a `legacy` saved value); ``None`` passes."""
    if value is None or value in options or (legacy and value in legacy):
        return
    raise InputError(input_name, f"one of {', '.join(map(str, options))}", repr(value))


def validate(*checks: Check) -> Union[bool, str]:
    """Run a node's queue-time checks; True, or the first `InputError` as its message.

    Each check is a ``(input_name, value, options)`` combo (see `choice`) or a callable that raises `InputError`.
    """
    try:
        for check in checks:
            if isinstance(check, tuple):
                choice(*check)
            else:
                check()
    except InputError as exc:
        return str(exc)
    return True


def auto_precision(device: Optional[torch.device] = None) -> str:
    """The pack's one "auto" precision (`engines.common.precision.auto_precision`), with ComfyUI's model management
    saying what runs well on `device` (default: ComfyUI's compute device)."""
    import comfy.model_management as mm

    device = torch.device(device) if device is not None else mm.get_torch_device()
    if device.type == "cpu":
        return "fp32"
    return policy(device, bool(mm.should_use_bf16(device)), bool(mm.should_use_fp16(device)))


def resolve_precision(value: str, device: Optional[torch.device] = None, input_name: str = "precision",
              supported: Sequence[str] = ("fp32", "fp16", "bf16")) -> str:
    """``auto|fp32|fp16|bf16`` (or an older saved name) -> the precision name to load with. `supported`: what the
    family can run; auto falls back to fp32 when its pick is not among them."""
    name = precision_name(value, input_name)
    if name == "auto":
        name = auto_precision(device)
        return name if name in supported else "fp32"
    if name not in supported:
        raise InputError(input_name, f"one of auto, {', '.join(supported)}", repr(value))
    return name


def resolve_dtype(value: str, device: Optional[torch.device] = None, input_name: str = "precision",
                    supported: Sequence[str] = ("fp32", "fp16", "bf16")) -> torch.dtype:
    return dtype_for(resolve_precision(value, device, input_name, supported))


__all__ = ["LEGACY_NAMES", "PRECISIONS", "auto_precision", "choice", "resolve_dtype", "resolve_precision", "validate"]

"""One way to open an ONNX file with onnxruntime (Ditto's face models and HuBERT, MuseTalk's SCRFD detector).

The rule for the execution provider: CUDA only when the caller's torch device is a CUDA device and this
onnxruntime build offers the CUDA provider, else the CPU. Following the device ComfyUI computes on (rather than
"whatever onnxruntime offers") keeps ``--cpu`` runs on the CPU and keeps the detector on the same GPU as the
networks it feeds.
"""
from __future__ import annotations

import os
from typing import Optional

import torch

from .errors import InputError


def providers_for(device: Optional[torch.device]) -> list[str]:
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    if device is not None and torch.device(device).type == "cuda" and \
            "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    return providers


def onnx_session(path: os.PathLike | str, device: Optional[torch.device] = None, input_name: Optional[str] = None,
                 expected: str = "a readable .onnx file"):
    """An ``onnxruntime.InferenceSession`` for `path` (warnings silenced: onnxruntime logs every unused
    initializer). With `input_name`, a file onnxruntime cannot open is an `InputError` naming that input."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=providers_for(device))
    except Exception as exc:  # onnxruntime's own errors are not user-facing text
        if input_name is None:
            raise
        raise InputError(input_name, expected, f"'{path}' ({type(exc).__name__}: {exc})") from None

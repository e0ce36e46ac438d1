"""One way to open an ONNX file with onnxruntime (Ditto's face models and HuBERT, MuseTalk's SCRFD detector).

The rule for the execution provider: CUDA only when the caller's torch device is a CUDA device and this
onnxruntime build offers the CUDA provider, else the CPU. Following the device ComfyUI computes on (rather than
"whatever onnxruntime offers") keeps ``--cpu`` runs on the CPU and keeps the detector on the same GPU as the
networks it feeds.
"""
from __future__ import annotations

import logging
import os
from typing import Optional

import torch

from .errors import InputError

log = logging.getLogger("broadcast_avatar")
_SAID: set = set()  # fallbacks already reported in this process: each is said once, never silently


def say_once(key: str, message: str) -> None:
    if key not in _SAID:
        _SAID.add(key)
        log.warning(message)


def providers_for(device: Optional[torch.device]) -> list[str]:
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    if device is not None and torch.device(device).type == "cuda":
        if "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        else:
            say_once("no-cuda-provider",
                     f"Broadcast Avatar: ONNX models run on the CPU although ComfyUI computes on {device}: this "
                     f"onnxruntime ({ort.__version__}) has no CUDA provider. Install onnxruntime-gpu (in place of "
                     "onnxruntime) to run them on the GPU.")
    return providers


def onnx_session(path: os.PathLike | str, device: Optional[torch.device] = None, input_name: Optional[str] = None,
                 expected: str = "a readable .onnx file", intra_op_threads: Optional[int] = None):
    """An ``onnxruntime.InferenceSession`` for `path` (warnings silenced: onnxruntime logs every unused
    initializer). With `input_name`, a file onnxruntime cannot open is an `InputError` naming that input.
    `intra_op_threads`: the CPU provider's thread count (None: onnxruntime's default, one per physical core)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if intra_op_threads:
        opts.intra_op_num_threads = int(intra_op_threads)
    providers = providers_for(device)
    try:
        session = ort.InferenceSession(str(path), sess_options=opts, providers=providers)
    except Exception as exc:  # onnxruntime's own errors are not user-facing text
        if input_name is None:
            raise
        raise InputError(input_name, expected, f"'{path}' ({type(exc).__name__}: {exc})") from None
    if providers[0] == "CUDAExecutionProvider" and "CUDAExecutionProvider" not in session.get_providers():
        # onnxruntime drops to the CPU by itself when the CUDA provider cannot start (CUDA or cuDNN libraries
        # missing or of another version): say so rather than run many times slower without a word.
        say_once("cuda-provider-failed",
                 f"Broadcast Avatar: onnxruntime could not start its CUDA provider for {os.path.basename(path)} "
                 "and runs ONNX models on the CPU (its CUDA/cuDNN libraries are missing or do not match this "
                 "onnxruntime-gpu build; onnxruntime's log at ComfyUI's start says which).")
    return session

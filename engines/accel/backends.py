"""One interface, "run this network", over every backend: eager, torch.compile, CUDA graphs, ONNX Runtime, TensorRT.

``accelerate(net, backend, device=..., ...)`` returns a runner: ``runner(*inputs)`` takes the inputs on any device
in any float dtype (they are moved to the weights' device and cast to the run's dtype) and returns what the
network returns. ``runner.summary`` says which backend runs and, if it is not the one asked for, what failed.

- ``auto`` tries the backends in the order measured fastest for this network on this device (the network's own
  ``Preference`` for the device type, else the device's ``AUTO_ORDER``) and keeps the first that builds and matches
  eager on an example input; it reports its choice and the order's reason once in the log and in ``summary``.
- an explicit backend that cannot run falls back to eager PyTorch, naming what failed (never silently).
- every non-eager runner is checked against eager on an example batch (cosine >= ``PARITY_MIN``) before it is
  used: a backend that builds but computes something else is a failure like any other.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from ..common.cache import ContentCache
from ..common.errors import InputError
from ..common.onnx import onnx_session
from . import tensorrt as trt_backend
from . import network
from .graphs import GraphRunner
from .network import Network, Preference, as_tuple, place
from .onnx_export import export_key, export_onnx
from .precision import name_of
from .shapes import run_fixed

log = logging.getLogger("broadcast_avatar.accel")

BACKENDS = ("auto", "eager", "compile", "cudagraphs", "onnxruntime", "tensorrt")
# `auto`, fastest first, per device type, for networks that declare no `Preference` of their own for it. CUDA: the
# posts' order (TensorRT, then graph-captured eager), to be confirmed by benchmarks/gpu_check.py (it prints every
# backend per network beside this order). CPU: eager, except where a network declares a measured order (MuseTalk's
# UNet: ONNX Runtime, docs/accel.md); onnxruntime and compile stay one explicit choice away for the others.
AUTO_ORDER = {"cuda": ("tensorrt", "cudagraphs", "eager"), "cpu": ("eager",)}
AUTO_WHY = {"cuda": "the GPU order from the source posts (TensorRT, then CUDA graphs)",
            "cpu": "no other backend measured faster for this network on a CPU"}
PARITY_MIN = 0.999


class BackendUnavailable(RuntimeError):
    """A backend cannot run this network here; the message is the reason shown to the user."""


@dataclass
class BuildOptions:
    batches: Sequence[int] = (1,)                 # batch sizes the caller will use (profiles, graphs, parity)
    cache: Optional[ContentCache] = None          # where ONNX exports are kept
    engine_root: Optional[Path] = None            # models/broadcast_tensorrt
    channels_last: Optional[bool] = None          # None: on a GPU for convolutional networks
    progress: Optional[Callable[[int, int], None]] = None   # engine build progress
    parity: bool = True
    compiler: str = "inductor"                    # torch.compile's backend (tests use "aot_eager": no C++ build)
    ort_threads: Optional[int] = None             # ONNX Runtime's intra-op threads (None: its default)


@dataclass
class Runner:
    """A built backend. `fn(*placed inputs)` does the work; `__call__` places the inputs first."""

    backend: str
    fn: Callable
    net: Network
    dtype: torch.dtype
    channels_last: bool = False
    detail: str = ""
    fallbacks: list = field(default_factory=list)      # "backend: reason" for each backend that was tried first
    parity: Optional[float] = None
    placed: bool = False                              # fn places its own inputs (TensorRT, ONNX Runtime on CUDA)
    asked: str = ""                                   # the backend the caller asked for ("auto" or this one)
    why: str = ""                                     # auto: the order it tried and the reason for that order
    fixed: tuple = ()                                 # the only batch sizes fn may see (fixed-shape backends)

    def __call__(self, *inputs):
        if self.fixed:          # the one shape policy (shapes.py): pad a short batch, split a long one, crop
            return run_fixed(self._run, self.fixed, inputs)
        return self._run(*inputs)

    def _run(self, *inputs):
        if self.placed:
            return self.fn(*inputs)
        return self.fn(*place(inputs, self.net.device, self.dtype, self.channels_last))

    @property
    def summary(self) -> str:
        text = f"{self.net.name}: {'auto picked ' if self.asked == 'auto' else ''}{self.backend}"
        extra = [x for x in (self.detail, name_of(self.dtype)) if x]
        text += f" ({', '.join(extra)})"
        if self.parity is not None:
            text += f", cos {self.parity:.6f} vs eager"
        if self.fallbacks:
            text += "; not used: " + "; ".join(self.fallbacks)
        if self.why:
            text += f"; {self.why}"
        return text


# -- the backends ------------------------------------------------------------------------------------------------
def _channels_last(net: Network, opts: BuildOptions) -> bool:
    if opts.channels_last is not None:
        return bool(opts.channels_last and net.convolutional)
    return net.convolutional and net.device.type == "cuda"


def _fixed(opts: BuildOptions) -> tuple:
    return tuple(sorted({int(b) for b in opts.batches}))


def build_eager(net: Network, opts: BuildOptions) -> Runner:
    cl = _channels_last(net, opts)
    if cl:
        net.module.to(memory_format=torch.channels_last)
    return Runner("eager", net.module, net, net.dtype, cl, detail="channels-last" if cl else "")


def build_compile(net: Network, opts: BuildOptions) -> Runner:
    cl = _channels_last(net, opts)
    if cl:
        net.module.to(memory_format=torch.channels_last)
    # dynamic=False: the shape policy (shapes.py) calls it only at the built batch sizes: one graph per batch
    compiled = torch.compile(net.module, dynamic=False, backend=opts.compiler)
    return Runner("compile", compiled, net, net.dtype, cl, detail=opts.compiler, fixed=_fixed(opts))


def build_cudagraphs(net: Network, opts: BuildOptions) -> Runner:
    if not network.is_gpu(net.device):
        raise BackendUnavailable(f"CUDA graphs need a CUDA GPU; this network runs on {net.device}")
    cl = _channels_last(net, opts)
    if cl:
        net.module.to(memory_format=torch.channels_last)
    return Runner("cudagraphs", GraphRunner(net), net, net.dtype, cl, detail="captured per batch",
                  fixed=_fixed(opts))


_ORT_TYPES = {torch.float32: "float32", torch.float16: "float16", torch.int64: "int64", torch.int32: "int32"}


class _OrtRunner:
    def __init__(self, session, net: Network, dtype: torch.dtype, cuda: bool):
        self.session, self.net, self.dtype, self.cuda = session, net, dtype, cuda
        self.out_shapes: dict = {}

    def __call__(self, *inputs):
        import numpy as np

        device = self.net.device
        if not self.cuda:
            feeds = {n: x.detach().cpu().numpy() for n, x in zip(self.net.input_names,
                                                                  place(inputs, torch.device("cpu"), self.dtype))}
            outs = self.session.run(list(self.net.output_names), feeds)
            res = tuple(torch.from_numpy(np.ascontiguousarray(o)).to(device) for o in outs)
            return res[0] if len(res) == 1 else res
        # CUDA: bind torch tensors by address, no host round trip; outputs sized from an eager run's shapes
        xs = [x.contiguous() for x in place(inputs, device, self.dtype)]
        binding = self.session.io_binding()
        for n, x in zip(self.net.input_names, xs):
            binding.bind_input(n, "cuda", device.index or 0, getattr(np, _ORT_TYPES[x.dtype]), tuple(x.shape),
                               x.data_ptr())
        b = xs[0].shape[0]
        if b not in self.out_shapes:
            with torch.inference_mode():
                ref = as_tuple(self.net.module(*xs))
            self.out_shapes[b] = [(tuple(o.shape), o.dtype) for o in ref]
        outs = []
        for n, (shape, dt) in zip(self.net.output_names, self.out_shapes[b]):
            o = torch.empty(shape, dtype=dt, device=device)
            binding.bind_output(n, "cuda", device.index or 0, getattr(np, _ORT_TYPES[dt]), shape, o.data_ptr())
            outs.append(o)
        torch.cuda.current_stream(device).synchronize()
        self.session.run_with_iobinding(binding)
        return outs[0] if len(outs) == 1 else tuple(outs)


def ort_session(path: Path, device: torch.device, threads: Optional[int] = None):
    """An ORT session for `path` on `device`; raises BackendUnavailable when ORT cannot use that device."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise BackendUnavailable(f"onnxruntime is not installed ({exc})") from None
    if device.type == "cuda" and "CUDAExecutionProvider" not in ort.get_available_providers():
        raise BackendUnavailable("this onnxruntime has no CUDA provider (the CPU build 'onnxruntime' is "
                                 "installed; install 'onnxruntime-gpu' instead)")
    if device.type not in ("cuda", "cpu"):
        raise BackendUnavailable(f"onnxruntime has no provider for {device.type} here")
    session = onnx_session(path, device, intra_op_threads=threads)
    if device.type == "cuda" and session.get_providers()[0] != "CUDAExecutionProvider":
        raise BackendUnavailable(f"onnxruntime could not start its CUDA provider (it runs {session.get_providers()})")
    return session


def build_onnxruntime(net: Network, opts: BuildOptions) -> Runner:
    dtype = net.dtype
    if dtype == torch.bfloat16:
        raise BackendUnavailable("onnxruntime has no bf16 kernels for these networks; choose fp16 or fp32")
    if net.device.type == "cpu" and dtype == torch.float16:
        raise BackendUnavailable("onnxruntime runs fp16 graphs on the CPU through slow casts; choose fp32 or bf16 "
                                 "on the CPU")
    session_device = net.device
    art = export_onnx(net, max(opts.batches), opts.cache)
    session = ort_session(art.path, session_device, opts.ort_threads)
    cuda = session_device.type == "cuda"
    provider = session.get_providers()[0]
    detail = f"{provider}, onnx {art.sha256[:12]}{', reused' if art.reused else ', exported'}"
    return Runner("onnxruntime", _OrtRunner(session, net, dtype, cuda), net, dtype, detail=detail, placed=True)


def tensorrt_dtype(weights: torch.dtype) -> torch.dtype:
    """The engine's precision for weights in `weights`: fp32 for fp32, fp16 for any 16-bit float. TensorRT 11 takes
    precision only from the ONNX dtypes, and bf16 engines are neither built by the pack nor needed: fp16 has more
    mantissa than bf16, and the parity gate (`build_tensorrt`) refuses an fp16 engine whose range falls short."""
    return torch.float32 if weights == torch.float32 else torch.float16


def build_tensorrt(net: Network, opts: BuildOptions) -> Runner:
    try:
        trt = trt_backend.probe(net.device)
    except trt_backend.TensorRTUnavailable as exc:
        raise BackendUnavailable(str(exc)) from None
    if opts.engine_root is None:
        raise BackendUnavailable("no engine folder was given (models/broadcast_tensorrt)")
    dtype = tensorrt_dtype(net.dtype)
    trace, smallest = max(opts.batches), min(opts.batches)
    # keyed on what the export would be made from (weights' fingerprint, shapes, exporter): a hit exports nothing
    key = trt_backend.engine_key(trt.version, net.device, net.name, name_of(dtype), opts.batches,
                                 export_key(net, dtype, trace))
    gate: dict = {}

    def reference(module_fp32) -> None:
        """In another precision than the weights', the engine must match eager fp32 (on the export's CPU copy)."""
        gate["sample"] = net.example(smallest)
        with torch.inference_mode():
            gate["ref"] = as_tuple(module_fp32(*place(gate["sample"], torch.device("cpu"), torch.float32)))

    def export() -> Path:
        return export_onnx(net, trace, opts.cache, dtype, reference if dtype != net.dtype else None).path

    def accept(data: bytes) -> None:
        if "ref" not in gate:
            return
        got = as_tuple(trt_backend.TensorRTRunner(trt, data, net, dtype, opts.batches, net.device)(*gate["sample"]))
        cos = min(cosine(r, g) for r, g in zip(gate["ref"], got))
        if not cos >= PARITY_MIN:
            raise trt_backend.TensorRTUnavailable(
                f"its {name_of(dtype)} engine differs from eager fp32 (cosine {cos:.5f} < {PARITY_MIN}); not kept")
        gate["cos"] = cos

    try:
        data = trt_backend.load_or_build(trt, Path(opts.engine_root), key, export, opts.batches, log.info,
                                         opts.progress, accept)
        runner = trt_backend.TensorRTRunner(trt, data, net, dtype, opts.batches, net.device)
    except trt_backend.TensorRTUnavailable as exc:
        raise BackendUnavailable(str(exc)) from None
    path = trt_backend.engine_path(Path(opts.engine_root), key)
    detail = f"{runner.detail}, {path.name}"
    if dtype != net.dtype:
        detail += f", {name_of(dtype)} engine for {name_of(net.dtype)} weights"
        if "cos" in gate:
            detail += f", cos {gate['cos']:.6f} vs fp32 when built"
    return Runner("tensorrt", runner, net, dtype, detail=detail, placed=True, fixed=_fixed(opts))


BUILDERS = {"eager": build_eager, "compile": build_compile, "cudagraphs": build_cudagraphs,
            "onnxruntime": build_onnxruntime, "tensorrt": build_tensorrt}


# -- selection ---------------------------------------------------------------------------------------------------
def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().flatten().cpu(), b.detach().double().flatten().cpu()
    denom = a.norm() * b.norm()
    if denom == 0:
        return 1.0 if torch.equal(a, b) else 0.0
    return float((a @ b) / denom)


def _check_parity(runner: Runner, net: Network, batch: int) -> float:
    example = net.example(batch)
    with torch.inference_mode():
        ref = as_tuple(net.module(*place(example, net.device, net.dtype)))
        got = as_tuple(runner(*example))
    if len(ref) != len(got):
        raise BackendUnavailable(f"returned {len(got)} outputs, eager returns {len(ref)}")
    cos = min(cosine(r, g) for r, g in zip(ref, got))
    if not cos >= PARITY_MIN:
        raise BackendUnavailable(f"its output differs from eager PyTorch (cosine {cos:.5f} < {PARITY_MIN})")
    return cos


_reported: set = set()


def _report(message: str) -> None:
    if message not in _reported:
        _reported.add(message)
        log.info("[Broadcast Avatar] %s", message)


def check_backend(backend: str, input_name: str = "backend") -> str:
    if backend not in BACKENDS:
        raise InputError(input_name, f"one of {', '.join(BACKENDS)}", repr(backend))
    return backend


def auto_order(net: Network, device: Optional[torch.device] = None) -> tuple:
    """(backends `auto` tries for `net` on `device` (default: where its weights are), fastest first; why that order).

    The network's own `Preference` for the device type wins over the device's `AUTO_ORDER`; eager always ends it.
    """
    kind = torch.device(device if device is not None else net.device).type
    pref: Optional[Preference] = (net.prefer or {}).get(kind)
    if pref is not None:
        order, why = tuple(pref.order), pref.why
        bad = [b for b in order if b not in BUILDERS]
        if bad:
            raise ValueError(f"{net.name}: unknown backend(s) {bad} in its {kind} preference")
    else:
        order, why = tuple(AUTO_ORDER.get(kind, ("eager",))), AUTO_WHY.get(kind, f"no other backend runs on {kind}")
    if "eager" not in order:
        order += ("eager",)
    return order, f"auto order on {kind}: {', '.join(order)} ({why})"


def accelerate(net: Network, backend: str = "auto", opts: Optional[BuildOptions] = None) -> Runner:
    """The runner for `net` on the device and in the dtype its weights have now."""
    check_backend(backend)
    opts = opts or BuildOptions()
    why = ""
    if backend == "auto":
        candidates, why = auto_order(net)
    else:
        candidates = [backend] if backend == "eager" else [backend, "eager"]
    failures = []
    for name in candidates:
        try:
            runner = BUILDERS[name](net, opts)
            if name != "eager" and opts.parity:
                runner.parity = _check_parity(runner, net, max(opts.batches))
        except BackendUnavailable as exc:
            failures.append(f"{name}: {exc}")
            continue
        except Exception as exc:     # a backend's own crash (compiler missing, export error): named, then next
            failures.append(f"{name}: failed with {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            continue
        runner.fallbacks, runner.asked, runner.why = failures, backend, why
        chosen = "" if backend == "auto" else ("running " if not failures else "falling back to ")
        _report(f"{net.name}: {chosen}{runner.summary.split(': ', 1)[1]}")      # auto: "auto picked ..."
        return runner
    raise RuntimeError(f"{net.name}: no backend could run it: {'; '.join(failures)}")

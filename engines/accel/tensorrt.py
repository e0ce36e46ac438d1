"""TensorRT engines from the pack's ONNX exports: detection, the engine key, the build (TensorRT 10 and 11), the run.

TensorRT is optional and imported lazily. Each way it can fail has its own message (the caller falls back to
PyTorch and says so):
- not installed;
- bindings without libraries: ``import tensorrt`` raises ``ImportError: libnvonnxparser.so.N`` (the PyPI
  ``tensorrt-cu12`` / ``-cu13`` packages are stubs that fetch the libraries from NVIDIA's own index, which can fail);
- libraries without a usable GPU: ``trt.Runtime`` / ``trt.Builder`` raise ``TypeError: ... returned nullptr`` (no
  driver, or another custom node pack preloaded a different libnvinfer);
- an engine built by another TensorRT version or for another GPU: never loaded (the key differs), rebuilt.

Both APIs: TensorRT 11 removed ``BuilderFlag.FP16``/``BF16``, ``EXPLICIT_BATCH`` and ``platform_has_fast_fp16``;
its networks are always strongly typed. So the build never sets a precision flag: precision comes from the ONNX
dtypes (an fp16 export for an fp16 engine) and the network is created ``STRONGLY_TYPED`` where that flag exists
(TensorRT 10), which gives the same engine on both.

Engines live in ``models/broadcast_tensorrt/`` as ``<network>_<precision>_b<batches>_trt<version>_sm<cc>_<key12>
.engine`` plus a ``.json`` sidecar holding the full key; they are written to a temporary name and renamed.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from .network import Network, as_tuple, place

ENGINE_FORMAT = 1
ENGINE_FOLDER = "broadcast_tensorrt"
DIST_NAMES = ("tensorrt", "tensorrt-cu12", "tensorrt-cu13", "tensorrt-cu12-bindings", "tensorrt-cu13-bindings")
INSTALL_HINT = "pip install tensorrt-cu12 (for torch built with CUDA 12), from NVIDIA's package index"
WORKSPACE_BYTES = 4 << 30


class TensorRTUnavailable(RuntimeError):
    """TensorRT cannot run here; the message says why and what to do."""


@dataclass(frozen=True)
class TensorRT:
    module: object           # the imported tensorrt package
    version: str


def installed_version() -> Optional[str]:
    """The version of whichever TensorRT distribution is installed (readable even when the import fails)."""
    for name in DIST_NAMES:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def probe(device: torch.device) -> TensorRT:
    """Import TensorRT and check it can start on `device`; raise `TensorRTUnavailable` naming the failure."""
    device = torch.device(device)
    if importlib.util.find_spec("tensorrt") is None:
        raise TensorRTUnavailable(f"TensorRT is not installed ({INSTALL_HINT})")
    dist = installed_version()
    try:
        trt = importlib.import_module("tensorrt")
    except (ImportError, OSError) as exc:
        raise TensorRTUnavailable(
            f"the TensorRT {dist or ''} Python bindings are installed but its libraries are not "
            f"({type(exc).__name__}: {exc}); install the matching tensorrt-cu12-libs (or reinstall "
            f"tensorrt-cu12) from NVIDIA's package index".replace("TensorRT  ", "TensorRT ")) from None
    version = str(getattr(trt, "__version__", dist or "unknown"))
    if device.type != "cuda":
        raise TensorRTUnavailable(f"TensorRT needs a CUDA GPU; this network runs on {device}")
    if not torch.cuda.is_available():
        raise TensorRTUnavailable("TensorRT needs a CUDA GPU; PyTorch sees none (driver missing or too old)")
    try:
        trt.Runtime(_logger(trt))
    except TypeError as exc:
        raise TensorRTUnavailable(
            f"TensorRT {version}'s libraries load but cannot start on this GPU ({exc}): no usable CUDA driver, or "
            "another custom node pack loaded a different libnvinfer first") from None
    return TensorRT(trt, version)


_loggers: dict = {}


def _logger(trt):
    if id(trt) not in _loggers:
        _loggers[id(trt)] = trt.Logger(trt.Logger.WARNING)
    return _loggers[id(trt)]


def network_flags(trt) -> int:
    """STRONGLY_TYPED where the flag exists (TensorRT 10); TensorRT 11 networks are strongly typed anyway."""
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    return 0 if flag is None else 1 << int(flag)


def engine_key(trt_version: str, device: torch.device, network: str, precision: str, batches: Sequence[int],
               onnx_sha256: str) -> dict:
    """Everything an engine is only valid for. Hardware compatibility level is NONE, so the GPU's name counts too."""
    major, minor = torch.cuda.get_device_capability(device)
    return {
        "format": ENGINE_FORMAT, "network": network, "tensorrt": trt_version, "compute_capability": f"{major}.{minor}",
        "gpu": torch.cuda.get_device_name(device), "cuda": str(torch.version.cuda), "os": platform.system(),
        "arch": platform.machine(), "precision": precision, "batches": sorted(int(b) for b in batches),
        "onnx_sha256": onnx_sha256, "hardware_compatibility": "none",
    }


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def engine_path(root: Path, key: dict) -> Path:
    batches = "-".join(str(b) for b in key["batches"])
    cc = key["compute_capability"].replace(".", "")
    return Path(root) / (f"{key['network']}_{key['precision']}_b{batches}_trt{key['tensorrt']}_sm{cc}_"
                         f"{key_digest(key)[:12]}.engine")


def foreign_engines(root: Path, key: dict) -> list[str]:
    """Engines of this network and precision built for another TensorRT / GPU / graph: why each is not used."""
    out = []
    for sidecar in sorted(Path(root).glob(f"{key['network']}_{key['precision']}_*.json")):
        try:
            other = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        diffs = [f"{k} {other.get(k)!r} (here {v!r})" for k, v in key.items() if other.get(k) != v]
        if diffs:
            out.append(f"{sidecar.with_suffix('.engine').name}: built for {', '.join(diffs)}")
    return out


def load_or_build(trt: TensorRT, root: Path, key: dict, onnx_path: Path, batches: Sequence[int],
                  log: Callable[[str], None], progress: Optional[Callable[[int, int], None]] = None) -> bytes:
    """The serialized engine for `key`: read from the cache, or built from `onnx_path` and stored."""
    path = engine_path(root, key)
    if path.is_file():
        try:
            stored = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stored = None
        if stored == key:
            return path.read_bytes()
        log(f"{path.name}: its sidecar key does not match this machine; not loaded, rebuilding")
    for line in foreign_engines(root, key):
        log(f"not loaded (another GPU, TensorRT version or graph): {line}")
    log(f"building TensorRT engine {path.name} (first use; this takes minutes)")
    data = build_engine(trt.module, onnx_path, batches, progress)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
        path.with_suffix(".json").write_text(json.dumps(key, indent=1, sort_keys=True), encoding="utf-8")
    finally:
        tmp.unlink(missing_ok=True)
    return data


def build_engine(trt, onnx_path: Path, batches: Sequence[int],
                 progress: Optional[Callable[[int, int], None]] = None) -> bytes:
    """Parse the ONNX graph and build one optimisation profile per batch size (min = opt = max = that batch)."""
    logger = _logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise TensorRTUnavailable(f"TensorRT could not parse {onnx_path.name}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
    if progress is not None and hasattr(trt, "IProgressMonitor"):
        config.progress_monitor = _progress_monitor(trt, progress)
    for b in sorted(batches):
        profile = builder.create_optimization_profile()
        for i in range(network.num_inputs):
            tensor = network.get_input(i)
            shape = (int(b), *[int(d) for d in tuple(tensor.shape)[1:]])
            profile.set_shape(tensor.name, shape, shape, shape)
        config.add_optimization_profile(profile)
    data = builder.build_serialized_network(network, config)
    if data is None:
        raise TensorRTUnavailable("TensorRT's builder returned no engine (out of GPU memory, or no implementation "
                                  "for a layer: see the TensorRT messages above)")
    return bytes(data)


def _progress_monitor(trt, report: Callable[[int, int], None]):
    class Monitor(trt.IProgressMonitor):
        def __init__(self):
            trt.IProgressMonitor.__init__(self)

        def phase_start(self, phase_name, parent_phase, num_steps):
            report(0, max(int(num_steps), 1))

        def step_complete(self, phase_name, step):
            report(int(step) + 1, 0)
            return True

        def phase_finish(self, phase_name):
            pass

    return Monitor()


_TORCH_DTYPES = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "INT32": torch.int32,
                 "INT64": torch.int64, "BOOL": torch.bool, "INT8": torch.int8, "UINT8": torch.uint8}


class TensorRTRunner:
    """Runs a deserialized engine on the network's inputs (CUDA tensors bound by address, one stream)."""

    backend = "tensorrt"

    def __init__(self, trt: TensorRT, data: bytes, net: Network, dtype: torch.dtype, batches: Sequence[int],
                 device: torch.device):
        runtime = trt.module.Runtime(_logger(trt.module))
        self.engine = runtime.deserialize_cuda_engine(data)
        if self.engine is None:
            raise TensorRTUnavailable("the cached engine could not be deserialized (another TensorRT build wrote "
                                      "it); delete it to rebuild")
        self.context = self.engine.create_execution_context()
        self.net, self.dtype, self.device = net, dtype, torch.device(device)
        self.profiles = {int(b): i for i, b in enumerate(sorted(batches))}
        self.detail = f"TensorRT {trt.version}"
        self._profile = None

    def __call__(self, *inputs):
        b = int(inputs[0].shape[0])
        if b not in self.profiles:
            raise ValueError(f"no TensorRT profile for batch {b} (built for {sorted(self.profiles)})")
        stream = torch.cuda.current_stream(self.device)
        if self._profile != b:
            self.context.set_optimization_profile_async(self.profiles[b], stream.cuda_stream)
            self._profile = b
        xs = [x.contiguous() for x in place(inputs, self.device, self.dtype)]
        for name, x in zip(self.net.input_names, xs):
            self.context.set_input_shape(name, tuple(x.shape))
            self.context.set_tensor_address(name, x.data_ptr())
        outs = []
        for name in self.net.output_names:
            shape = tuple(self.context.get_tensor_shape(name))
            dtype = _TORCH_DTYPES[str(self.engine.get_tensor_dtype(name)).split(".")[-1]]
            out = torch.empty(shape, dtype=dtype, device=self.device)
            self.context.set_tensor_address(name, out.data_ptr())
            outs.append(out)
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execution failed (see the TensorRT messages above)")
        return outs[0] if len(outs) == 1 else tuple(outs)


__all__ = ["TensorRTUnavailable", "probe", "engine_key", "engine_path", "load_or_build", "build_engine",
           "TensorRTRunner", "network_flags", "foreign_engines", "ENGINE_FOLDER", "as_tuple"]

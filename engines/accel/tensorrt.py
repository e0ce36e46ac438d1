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

from . import network
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
    trt = import_tensorrt()
    require_gpu(trt, device)
    return trt


def import_tensorrt() -> TensorRT:
    """The installed TensorRT module and its version, or `TensorRTUnavailable` saying what is missing."""
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
    return TensorRT(trt, str(getattr(trt, "__version__", dist or "unknown")))


def require_gpu(trt: TensorRT, device: torch.device) -> None:
    """TensorRT runs only on a CUDA device, with a driver its libraries can start on."""
    device = torch.device(device)
    if not network.is_gpu(device):
        raise TensorRTUnavailable(f"TensorRT needs a CUDA GPU; this network runs on {device}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TensorRTUnavailable("TensorRT needs a CUDA GPU; PyTorch sees none (driver missing or too old)")
    try:
        trt.module.Runtime(_logger(trt.module))
    except TypeError as exc:
        raise TensorRTUnavailable(
            f"TensorRT {trt.version}'s libraries load but cannot start on this GPU ({exc}): no usable CUDA driver, "
            "or another custom node pack loaded a different libnvinfer first") from None


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
               graph_key: str) -> dict:
    """Everything an engine is only valid for, known without exporting anything: `graph_key` is the ONNX export's
    key (``onnx_export.export_key``: the weights' fingerprint, input shapes, opset, exporter version), so a cache
    hit needs no ONNX file on disk. Hardware compatibility level is NONE, so the GPU's name counts too."""
    major, minor = torch.cuda.get_device_capability(device)
    return {
        "format": ENGINE_FORMAT, "network": network, "tensorrt": trt_version, "compute_capability": f"{major}.{minor}",
        "gpu": torch.cuda.get_device_name(device), "cuda": str(torch.version.cuda), "os": platform.system(),
        "arch": platform.machine(), "precision": precision, "batches": sorted(int(b) for b in batches),
        "graph": graph_key, "hardware_compatibility": "none",
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


_read_only_said: set = set()


def load_or_build(trt: TensorRT, root: Path, key: dict, onnx: Callable[[], Path], batches: Sequence[int],
                  log: Callable[[str], None], progress: Optional[Callable[[int, int], None]] = None,
                  accept: Optional[Callable[[bytes], None]] = None) -> bytes:
    """The serialized engine for `key`: read from the cache, or built from the ONNX export `onnx()` gives (called
    only on a miss), checked by `accept(data)` (raises to refuse it: a refused engine is never stored) and stored. A folder that cannot be written (a read-only models folder on a shared drive) still
    gives its hits; an engine built there is used for this session and one note says it could not be kept."""
    path = engine_path(root, key)
    stored = read_engine(path, key, log)
    if stored is not None:
        return stored
    for line in foreign_engines(root, key):
        log(f"not loaded (another GPU, TensorRT version or graph): {line}")
    log(f"building TensorRT engine {path.name} (first use; this takes minutes)")
    data = build_engine(trt.module, onnx(), batches, progress)
    if accept is not None:
        accept(data)
    try:
        store_engine(path, key, data)
    except OSError as exc:
        if str(path.parent) not in _read_only_said:
            _read_only_said.add(str(path.parent))
            log(f"{path.parent} cannot be written ({type(exc).__name__}: {exc.strerror or exc}): the engines found "
                "there are used, but a new one (this one) is built again in every session; build it once where "
                "the folder is writable to keep it")
    return data


def read_engine(path: Path, key: dict, log: Callable[[str], None]) -> Optional[bytes]:
    """The engine stored at `path` if its sidecar holds exactly `key`; None (said why) otherwise. Reads only: a
    read-only folder gives its hits, and nothing is deleted here."""
    if not path.is_file():
        return None
    try:
        stored = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log(f"{path.name}: its sidecar cannot be read ({type(exc).__name__}); not loaded, building")
        return None
    if stored != key:
        log(f"{path.name}: its sidecar key does not match this machine; not loaded, rebuilding")
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        log(f"{path.name} cannot be read ({type(exc).__name__}: {exc.strerror or exc}); building")
        return None


def store_engine(path: Path, key: dict, data: bytes) -> None:
    """Write the engine, then its sidecar, each to a temporary name renamed into place (readers see both or the
    old pair); raises OSError when the folder cannot be written."""
    root = path.parent
    root.mkdir(parents=True, exist_ok=True)
    for target, payload in ((path, data), (path.with_suffix(".json"),
                                           json.dumps(key, indent=1, sort_keys=True).encode("utf-8"))):
        tmp = root / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            tmp.write_bytes(payload)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)


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


ALIGNMENT = 256          # TensorRT: "The pointer must have at least 256-byte alignment" (NvInferRuntime.h)


class TensorRTRunner:
    """Runs a deserialized engine on the network's inputs: CUDA tensors bound by address, executed on a stream of
    its own ordered after the caller's work and before the caller's next (TensorRT warns that the default stream
    costs extra synchronisation). Every shape and address the context refuses is an error here, never ignored:
    TensorRT answers False and keeps the previous shape, which would run on stale bindings. Only the batch sizes
    the engine has profiles for are accepted (the shape policy, ``shapes.py``, pads the others)."""

    backend = "tensorrt"

    def __init__(self, trt: TensorRT, data: bytes, net: Network, dtype: torch.dtype, batches: Sequence[int],
                 device: torch.device):
        runtime = trt.module.Runtime(_logger(trt.module))
        self.engine = runtime.deserialize_cuda_engine(data)
        if self.engine is None:
            raise TensorRTUnavailable("the cached engine could not be deserialized (another TensorRT build wrote "
                                      "it); delete it to rebuild")
        names = {self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)}
        missing = [n for n in (*net.input_names, *net.output_names) if n not in names]
        if missing:
            raise TensorRTUnavailable(f"the engine has no tensor(s) {missing} (it holds {sorted(names)})")
        self.context = self.engine.create_execution_context()
        self.net, self.dtype, self.device = net, dtype, torch.device(device)
        self.profiles = {int(b): i for i, b in enumerate(sorted(batches))}
        self.detail = f"TensorRT {trt.version}"
        self.out_dtypes = [_TORCH_DTYPES[str(self.engine.get_tensor_dtype(n)).split(".")[-1]]
                           for n in net.output_names]
        self.in_dtypes = {n: _TORCH_DTYPES[str(self.engine.get_tensor_dtype(n)).split(".")[-1]]
                          for n in net.input_names}
        self._profile = None
        self._stream = None

    def _aligned(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """`x` as the engine takes it: its dtype, contiguous, on a 256-byte boundary (a row slice of a batch may
        start anywhere)."""
        want = self.in_dtypes[name]
        x = x.to(self.device, want) if x.dtype != want or x.device != self.device else x
        x = x.contiguous()
        return x if x.data_ptr() % ALIGNMENT == 0 else x.clone()

    def __call__(self, *inputs):
        b = int(inputs[0].shape[0])
        if b not in self.profiles:
            raise ValueError(f"no TensorRT profile for batch {b} (built for {sorted(self.profiles)})")
        caller = torch.cuda.current_stream(self.device)
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        stream = self._stream
        stream.wait_stream(caller)                       # the inputs were written on the caller's stream
        if self._profile != b:
            self.context.set_optimization_profile_async(self.profiles[b], stream.cuda_stream)
            self._profile = b
        xs = [self._aligned(n, x) for n, x in zip(self.net.input_names, place(inputs, self.device, self.dtype))]
        for name, x in zip(self.net.input_names, xs):
            if not self.context.set_input_shape(name, tuple(x.shape)):
                raise RuntimeError(f"TensorRT refused shape {tuple(x.shape)} for input {name!r} (see its message "
                                   "above)")
            self._bind(name, x)
        outs = []
        for name, dtype in zip(self.net.output_names, self.out_dtypes):
            shape = tuple(self.context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise RuntimeError(f"TensorRT cannot size output {name!r} ({shape}) from the inputs")
            out = torch.empty(shape, dtype=dtype, device=self.device)
            self._bind(name, out)
            outs.append(out)
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execution failed (see the TensorRT messages above)")
        caller.wait_stream(stream)                       # the caller reads the outputs, frees the inputs after this
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _bind(self, name: str, x: torch.Tensor) -> None:
        if not self.context.set_tensor_address(name, x.data_ptr()):
            raise RuntimeError(f"TensorRT refused the address of {name!r}")


__all__ = ["TensorRTUnavailable", "probe", "import_tensorrt", "require_gpu", "engine_key", "read_engine",
           "store_engine", "engine_path", "load_or_build", "build_engine",
           "TensorRTRunner", "network_flags", "foreign_engines", "ENGINE_FOLDER", "as_tuple"]

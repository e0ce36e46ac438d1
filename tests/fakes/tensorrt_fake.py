"""A contract fake of the TensorRT Python API (10.x and 11.x), installable in place of ``tensorrt``.

``FakeTensorRT(major).install(monkeypatch)`` puts a module named ``tensorrt`` into ``sys.modules`` with the names
the pack's TensorRT code calls, spelled and behaving as TensorRT ``major`` spells them and behaves (sources:
../shared/reference/notes/tensorrt-cudagraph-api-contract.md section 1; the wheels' bindings):

- ``Logger``, ``Builder`` (``create_network(flags)``, ``create_builder_config``, ``create_optimization_profile``,
  ``build_serialized_network`` -> a host-memory object or None), ``OnnxParser`` (``parse``, ``parse_from_file``,
  ``num_errors``, ``get_error``), ``IBuilderConfig`` (``set_memory_pool_limit``, ``set_flag``,
  ``add_optimization_profile`` -> index or -1, ``progress_monitor``), ``IOptimizationProfile.set_shape`` (raises
  ``RuntimeError`` on inconsistent min/opt/max), ``IProgressMonitor``, ``Runtime.deserialize_cuda_engine`` (None on
  foreign bytes, another TensorRT version or another compute capability), ``ICudaEngine`` (``num_io_tensors``,
  ``get_tensor_name``, ``get_tensor_mode``, ``get_tensor_dtype``, ``get_tensor_shape``,
  ``get_tensor_profile_shape``, ``num_optimization_profiles``, ``create_execution_context``) and
  ``IExecutionContext`` (``set_optimization_profile_async``, ``set_input_shape`` -> bool, ``get_tensor_shape``,
  ``infer_shapes``, ``all_binding_shapes_specified``, ``set_tensor_address`` -> bool, ``get_tensor_address``,
  ``execute_async_v3`` -> bool).
- the version surface: 10.x has ``NetworkDefinitionCreationFlag.EXPLICIT_BATCH`` (0) and ``STRONGLY_TYPED`` (1),
  ``BuilderFlag.FP16/BF16/...`` and ``Builder.platform_has_fast_fp16``; 11.x has ``STRONGLY_TYPED`` = 0 only, no
  precision builder flags, no ``platform_has_*`` (``AttributeError``, as the real module raises). 10.x refuses a
  strongly typed network built with ``FP16`` set (the build returns None). Engine I/O dtypes are the ONNX dtypes.
- what TensorRT enforces: every dynamic input covered by every profile (else no engine); profile shapes within
  rank and static dims; ``set_input_shape`` refused (False, message logged, the previous shape kept) outside the
  active profile, with a wrong rank or a static dim changed; ``execute_async_v3`` refused (False, outputs untouched)
  while an input shape or any input/output address is missing; unknown names answered as TensorRT answers them
  (``NONE``, ``FLOAT``, ``Dims(-1)``, False) and recorded. Stream 0 logs TensorRT's default-stream warning.

Addresses. There is no device memory here: an address is ``tensor.data_ptr()`` of a CPU tensor. While installed the
fake wraps ``torch.Tensor.data_ptr`` so that every pointer handed out is remembered with (a weak reference to) its
tensor; ``execute_async_v3`` resolves each bound address back to the live tensor whose ``data_ptr()`` it still is,
and refuses an address that resolves to nothing (freed, never a tensor), that sits off a 256-byte boundary within
its allocation (TensorRT's rule; the CUDA allocator's blocks start 512-aligned, so the offset is what a caller
controls), or whose tensor is not contiguous, not of the engine's dtype, or too small for the context's shape.
TensorRT itself checks neither dtype nor size (it gets a bare integer): the fake is deliberately stricter there,
since a mismatch is silent garbage on a GPU.

Output shapes (``get_tensor_shape`` of an output once every input shape is set) come from one onnxruntime run on
zeros at those input shapes, as TensorRT infers them from its network. Outputs are computed by running the ONNX
graph the engine was built from with onnxruntime on the CPU, and written in place into the bound output tensors, as the engine writes into device memory. The "plan" carries the ONNX bytes,
the TensorRT version and the compute capability, so a stored engine runs without the ONNX file, as a real one does.

``violations`` lists every refusal and unknown-name lookup; a test asserts it is empty after a correct run.
"""
from __future__ import annotations

import enum
import importlib.machinery
import json
import sys
import types
import weakref

import numpy as np
import torch

MAGIC = b"FAKETRT\x00"
ALIGNMENT = 256
DEFAULT_STREAM_WARNING = ("Using default stream in enqueueV3() may lead to performance issues due to additional "
                          "calls to cudaStreamSynchronize() by TensorRT to ensure correct synchronization. Please "
                          "use non-default stream instead.")


class DataType(enum.Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8


class TensorIOMode(enum.Enum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


TORCH = {DataType.FLOAT: torch.float32, DataType.HALF: torch.float16, DataType.BF16: torch.bfloat16,
         DataType.INT32: torch.int32, DataType.INT64: torch.int64, DataType.BOOL: torch.bool,
         DataType.INT8: torch.int8, DataType.UINT8: torch.uint8}
TORCH_NP = {DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.INT32: np.int32,
            DataType.INT64: np.int64, DataType.BOOL: np.bool_, DataType.INT8: np.int8, DataType.UINT8: np.uint8}
ONNX_TO_TRT = {1: DataType.FLOAT, 10: DataType.HALF, 16: DataType.BF16, 6: DataType.INT32, 7: DataType.INT64,
               9: DataType.BOOL, 3: DataType.INT8, 2: DataType.UINT8}


class Dims(tuple):
    """trt.Dims: a tuple of ints (-1 for a dynamic dim)."""


class FakeTensorRT:
    def __init__(self, major: int = 10, version: str = None, cuda=None):
        self.major = int(major)
        self.version = version or {10: "10.13.3.9.post1", 11: "11.4.0.106"}[self.major]
        self.cuda = cuda                     # a FakeCuda: its compute capability is the GPU's
        self.messages: list = []             # (severity, text) as the logger receives them
        self.violations: list = []
        self.builds = 0
        self._addresses: dict = {}           # data_ptr -> [weakref(tensor), ...]
        self.module = self._module()

    # -- what TensorRT logs ---------------------------------------------------------------------------------------
    def log(self, severity: str, text: str, violation: bool = True) -> None:
        self.messages.append((severity, text))
        if violation:
            self.violations.append(text)

    def capability(self) -> str:
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"

    # -- addresses ------------------------------------------------------------------------------------------------
    def _remember(self, real):
        fake = self

        def data_ptr(t):
            ptr = real(t)
            refs = fake._addresses.setdefault(ptr, [])
            if not any(r() is t for r in refs):
                refs[:] = [r for r in refs if r() is not None][-7:] + [weakref.ref(t)]
            return ptr
        return data_ptr

    def resolve(self, ptr: int):
        """The live tensor `ptr` is the data_ptr() of (the latest one asked); else, as device memory stays valid
        while its allocation lives, a flat view at `ptr` into a live registered tensor's storage; else None."""
        for ref in reversed(self._addresses.get(ptr, [])):
            t = ref()
            if t is not None and torch.Tensor.data_ptr(t) == ptr:
                return t
        for refs in list(self._addresses.values()):
            for ref in refs:
                t = ref()
                if t is None:
                    continue
                storage = t.untyped_storage()
                base = storage.data_ptr()
                if base <= ptr < base + storage.nbytes() and (ptr - base) % t.element_size() == 0:
                    offset = (ptr - base) // t.element_size()
                    size = storage.nbytes() // t.element_size() - offset
                    return torch.empty(0, dtype=t.dtype).set_(storage, offset, (size,))
        return None

    def install(self, monkeypatch) -> "FakeTensorRT":
        monkeypatch.setitem(sys.modules, "tensorrt", self.module)
        monkeypatch.setattr(torch.Tensor, "data_ptr", self._remember(torch.Tensor.data_ptr))
        return self

    # -- the module ---------------------------------------------------------------------------------------------------
    def _module(self):
        fake, major = self, self.major
        mod = types.ModuleType("tensorrt")
        mod.__spec__ = importlib.machinery.ModuleSpec("tensorrt", None)
        mod.__version__ = self.version
        mod.DataType, mod.TensorIOMode, mod.Dims = DataType, TensorIOMode, Dims
        mod.float32, mod.float16, mod.bfloat16 = DataType.FLOAT, DataType.HALF, DataType.BF16
        mod.int32, mod.int64 = DataType.INT32, DataType.INT64
        if major == 10:
            mod.NetworkDefinitionCreationFlag = types.SimpleNamespace(EXPLICIT_BATCH=0, STRONGLY_TYPED=1,
                                                                      PREFER_JIT_PYTHON_PLUGINS=2,
                                                                      PREFER_AOT_PYTHON_PLUGINS=3)
            mod.BuilderFlag = types.SimpleNamespace(FP16=0, BF16=1, INT8=2, FP8=3, TF32=4, DIRECT_IO=5,
                                                    VERSION_COMPATIBLE=6, OBEY_PRECISION_CONSTRAINTS=7,
                                                    PREFER_PRECISION_CONSTRAINTS=8)
        else:
            mod.NetworkDefinitionCreationFlag = types.SimpleNamespace(STRONGLY_TYPED=0, PREFER_JIT_PYTHON_PLUGINS=1,
                                                                      PREFER_AOT_PYTHON_PLUGINS=2)
            mod.BuilderFlag = types.SimpleNamespace(TF32=4, DIRECT_IO=5, VERSION_COMPATIBLE=6)
        mod.MemoryPoolType = types.SimpleNamespace(WORKSPACE=0)

        class Logger:
            INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = 0, 1, 2, 3, 4

            def __init__(self, min_severity=2):
                self.min_severity = min_severity

        class IProgressMonitor:
            def __init__(self):
                pass

        class ITensor:
            def __init__(self, name, dtype, shape, dim_names):
                self.name, self.dtype, self.shape, self.dim_names = name, dtype, Dims(shape), dim_names

        class INetworkDefinition:
            def __init__(self, flags):
                self.flags, self.inputs, self.outputs, self.onnx = flags, [], [], None
                strong_bit = 1 << mod.NetworkDefinitionCreationFlag.STRONGLY_TYPED
                self.strongly_typed = major >= 11 or bool(flags & strong_bit)

            @property
            def num_inputs(self):
                return len(self.inputs)

            @property
            def num_outputs(self):
                return len(self.outputs)

            def get_input(self, i):
                return self.inputs[i]

            def get_output(self, i):
                return self.outputs[i]

        class ParserError:
            def __init__(self, desc):
                self._desc = desc

            def desc(self):
                return self._desc

            def __str__(self):
                return f"In node -1 (parse): MODEL_DESERIALIZE_FAILED: {self._desc}"

        class OnnxParser:
            def __init__(self, network, logger):
                self.network, self.errors = network, []

            @property
            def num_errors(self):
                return len(self.errors)

            def get_error(self, i):
                return self.errors[i]

            def parse_from_file(self, path):
                try:
                    import onnx

                    model = onnx.load(str(path), load_external_data=True)
                except Exception as exc:
                    self.errors.append(ParserError(f"{type(exc).__name__}: {exc}"))
                    return False
                return self._take(model)

            def parse(self, model_bytes, path=None):
                import onnx

                try:
                    model = onnx.load_from_string(bytes(model_bytes))
                except Exception as exc:
                    self.errors.append(ParserError(f"{type(exc).__name__}: {exc}"))
                    return False
                return self._take(model)

            def _take(self, model):
                def tensors(values):
                    out = []
                    for v in values:
                        tt = v.type.tensor_type
                        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
                        names = [d.dim_param if not d.HasField("dim_value") else None for d in tt.shape.dim]
                        out.append(ITensor(v.name, ONNX_TO_TRT[tt.elem_type], dims, names))
                    return out
                init = {i.name for i in model.graph.initializer}
                self.network.inputs = tensors([v for v in model.graph.input if v.name not in init])
                self.network.outputs = tensors(model.graph.output)
                self.network.onnx = model.SerializeToString()
                return True

        class IOptimizationProfile:
            def __init__(self):
                self.shapes = {}

            def set_shape(self, name, min, opt, max):        # noqa: A002 - TensorRT's keyword names
                lo, mid, hi = (tuple(int(d) for d in s) for s in (min, opt, max))
                for label, s in (("min", lo), ("opt", mid), ("max", hi)):
                    if len(s) != len(lo) or len(s) != len(hi):
                        raise RuntimeError(f"Shape provided for {label} is inconsistent with other shapes.")
                if not all(0 <= a <= b <= c for a, b, c in zip(lo, mid, hi)):
                    raise RuntimeError("Shape provided for min is inconsistent with other shapes.")
                self.shapes[name] = (lo, mid, hi)

            def __bool__(self):
                return bool(self.shapes)

        class IBuilderConfig:
            def __init__(self):
                self.flags, self.profiles, self.progress_monitor, self.pools = set(), [], None, {}

            def set_memory_pool_limit(self, pool, size):
                self.pools[pool] = int(size)

            def set_flag(self, flag):
                self.flags.add(flag)

            def get_flag(self, flag):
                return flag in self.flags

            def add_optimization_profile(self, profile):
                if not profile:
                    return -1
                self.profiles.append(profile)
                return len(self.profiles) - 1

        class HostMemory:
            def __init__(self, data):
                self._data = bytes(data)
                self.nbytes = len(self._data)

            def __bytes__(self):
                return self._data

        class Builder:
            def __init__(self, logger):
                self.logger = logger

            def create_network(self, flags=0):
                return INetworkDefinition(int(flags))

            def create_builder_config(self):
                return IBuilderConfig()

            def create_optimization_profile(self):
                return IOptimizationProfile()

            def build_serialized_network(self, network, config):
                if network.onnx is None:
                    fake.log("E", "Network must have at least one output")
                    return None
                if major == 10 and network.strongly_typed and mod.BuilderFlag.FP16 in config.flags:
                    fake.log("E", "IBuilder::buildSerializedNetwork: Error Code 3: API Usage Error (Parameter check "
                                  "failed, condition: !config.getFlag(BuilderFlag::kFP16).)")
                    return None
                dynamic = [t for t in network.inputs if -1 in t.shape]
                if dynamic and not config.profiles:
                    fake.log("E", "Network has dynamic or shape inputs, but no optimization profile has been "
                                  "defined.")
                    return None
                profiles = []
                for p in config.profiles:
                    entry = {}
                    for t in network.inputs:
                        if t.name not in p.shapes:
                            if -1 in t.shape:
                                fake.log("E", f"Optimization profile is missing values for dynamic input {t.name}")
                                return None
                            entry[t.name] = [list(t.shape)] * 3
                            continue
                        lo, mid, hi = p.shapes[t.name]
                        if len(lo) != len(t.shape) or any(d != -1 and not (a == b == c == d) for d, a, b, c in
                                                          zip(t.shape, lo, mid, hi)):
                            fake.log("E", f"profile for {t.name} {lo}..{hi} does not match the network's "
                                          f"{tuple(t.shape)}")
                            return None
                        entry[t.name] = [list(lo), list(mid), list(hi)]
                    profiles.append(entry)
                monitor = config.progress_monitor
                if monitor is not None:
                    monitor.phase_start("Building engine", None, 2)
                    for step in range(2):
                        monitor.step_complete("Building engine", step)
                    monitor.phase_finish("Building engine")
                fake.builds += 1
                header = {"version": fake.version, "cc": fake.capability(), "profiles": profiles,
                          "io": [[t.name, "INPUT", t.dtype.name, list(t.shape), t.dim_names] for t in network.inputs]
                          + [[t.name, "OUTPUT", t.dtype.name, list(t.shape), t.dim_names] for t in network.outputs]}
                head = json.dumps(header).encode()
                return HostMemory(MAGIC + len(head).to_bytes(8, "little") + head + network.onnx)

        class Runtime:
            def __init__(self, logger):
                self.logger = logger

            def deserialize_cuda_engine(self, data):
                data = bytes(data)
                if not data.startswith(MAGIC):
                    fake.log("E", "IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization "
                                  "assertion header.magicTag == kEXPECTED_MAGIC_TAG failed.)")
                    return None
                n = int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "little")
                header = json.loads(data[len(MAGIC) + 8:len(MAGIC) + 8 + n])
                if header["version"] != fake.version:
                    fake.log("E", "The engine plan file is not compatible with this version of TensorRT, expecting "
                                  f"library version {fake.version} got {header['version']}, please rebuild.")
                    return None
                if header["cc"] != fake.capability():
                    fake.log("E", "The engine plan file is generated on an incompatible device, expecting compute "
                                  f"{fake.capability()} got compute {header['cc']}, please rebuild.")
                    return None
                return ICudaEngine(header, data[len(MAGIC) + 8 + n:])

        class ICudaEngine:
            def __init__(self, header, onnx_bytes):
                import onnxruntime as ort

                self.io = {name: {"mode": TensorIOMode[mode], "dtype": DataType[dt], "shape": Dims(shape),
                                  "dim_names": dims} for name, mode, dt, shape, dims in header["io"]}
                self.names = [row[0] for row in header["io"]]
                self.profiles = header["profiles"]
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = 1
                self.session = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
                self._shape_cache = {}

            def output_shapes(self, shapes):
                """TensorRT's shape inference, done here by one onnxruntime run on zeros (kept per input shapes)."""
                key = tuple(sorted(shapes.items()))
                if key not in self._shape_cache:
                    feeds = {n: np.zeros(shapes[n], dtype=TORCH_NP[self.io[n]["dtype"]]) for n in shapes}
                    outs = [n for n in self.names if self.io[n]["mode"] == TensorIOMode.OUTPUT]
                    got = self.session.run(outs, feeds)
                    self._shape_cache[key] = {n: tuple(v.shape) for n, v in zip(outs, got)}
                return self._shape_cache[key]

            @property
            def num_io_tensors(self):
                return len(self.names)

            @property
            def num_optimization_profiles(self):
                return max(1, len(self.profiles))

            def get_tensor_name(self, i):
                if not -len(self.names) <= i < len(self.names):
                    raise IndexError("Out of bounds")
                return self.names[i]

            __getitem__ = get_tensor_name

            def _unknown(self, name, what):
                fake.violations.append(f"{what}: unknown tensor name {name!r}")

            def get_tensor_mode(self, name):
                if name not in self.io:
                    self._unknown(name, "get_tensor_mode")
                    return TensorIOMode.NONE
                return self.io[name]["mode"]

            def get_tensor_dtype(self, name):
                if name not in self.io:
                    self._unknown(name, "get_tensor_dtype")
                    return DataType.FLOAT                      # TensorRT's silent answer
                return self.io[name]["dtype"]

            def get_tensor_shape(self, name):
                if name not in self.io:
                    self._unknown(name, "get_tensor_shape")
                    return Dims((-1,))
                return self.io[name]["shape"]

            def get_tensor_profile_shape(self, name, profile_index):
                if name not in self.io or not 0 <= profile_index < len(self.profiles):
                    self._unknown(name, "get_tensor_profile_shape")
                    return [Dims((-1,))]
                return [Dims(s) for s in self.profiles[profile_index][name]]

            def create_execution_context(self, strategy=None):
                return IExecutionContext(self)

        class IExecutionContext:
            def __init__(self, engine):
                self.engine, self.profile, self.shapes, self.addresses = engine, 0, {}, {}

            @property
            def active_optimization_profile(self):
                return self.profile

            def set_optimization_profile_async(self, profile_index, stream_handle):
                if not 0 <= int(profile_index) < self.engine.num_optimization_profiles:
                    raise RuntimeError("Error in set optimization profile async.")
                self.profile = int(profile_index)
                self.shapes = {}                                 # the dynamic shapes must be set again
                return True

            def _refuse(self, condition, detail):
                fake.log("E", f"IExecutionContext::setInputShape: Error Code 3: API Usage Error (Parameter check "
                              f"failed, condition: {condition}. {detail})")
                return False

            def set_input_shape(self, name, shape):
                io = self.engine.io.get(name)
                dims = tuple(int(d) for d in shape)
                if io is None or io["mode"] != TensorIOMode.INPUT:
                    return self._refuse("tensor is an input", f"{name!r} is not an input tensor of this engine")
                if len(dims) != len(io["shape"]):
                    return self._refuse("engineDims.nbDims == dims.nbDims", f"Set dimensions are {list(dims)} for "
                                        f"{name}. Expected rank {len(io['shape'])}.")
                for d, e in zip(dims, io["shape"]):
                    if e != -1 and d != e:
                        return self._refuse("engineDims.d[i] == dims.d[i]", "Static dimension mismatch while "
                                            f"setting input shape for {name}. Set dimensions are {list(dims)}. "
                                            f"Expected dimensions are {list(io['shape'])}.")
                lo, _, hi = self.engine.profiles[self.profile][name]
                if not all(a <= d <= b for a, d, b in zip(lo, dims, hi)):
                    return self._refuse("satisfyProfile", f"Set dimension {list(dims)} for tensor {name} does not "
                                        "satisfy any optimization profiles. Valid range for profile "
                                        f"{self.profile}: {lo}..{hi}.")
                self.shapes[name] = dims
                return True

            def _inputs(self):
                return [n for n in self.engine.names if self.engine.io[n]["mode"] == TensorIOMode.INPUT]

            def infer_shapes(self):
                return [n for n in self._inputs() if n not in self.shapes]

            @property
            def all_binding_shapes_specified(self):
                return not self.infer_shapes()

            def get_tensor_shape(self, name):
                io = self.engine.io.get(name)
                if io is None:
                    fake.violations.append(f"get_tensor_shape: unknown tensor name {name!r}")
                    return Dims((-1,))
                if io["mode"] == TensorIOMode.INPUT:
                    return Dims(self.shapes.get(name, io["shape"]))
                if self.infer_shapes():
                    return Dims(io["shape"])                     # -1 stays while an input shape is unset
                return Dims(self.engine.output_shapes(self.shapes)[name])

            def set_tensor_address(self, name, memory):
                if name not in self.engine.io:
                    fake.violations.append(f"set_tensor_address: unknown tensor name {name!r}")
                    return False
                self.addresses[name] = int(memory)
                return True

            def get_tensor_address(self, name):
                return self.addresses.get(name, 0)

            def _buffer(self, name, shape):
                """The tensor at `name`'s address viewed at `shape`, or a refusal message."""
                ptr = self.addresses.get(name, 0)
                io = self.engine.io[name]
                kind = "input" if io["mode"] == TensorIOMode.INPUT else "output"
                if not ptr:
                    return ("IExecutionContext::enqueueV3: Error Code 3: API Usage Error (Parameter check failed, "
                            f"condition: mContext.profileObliviousBindings.at(profileObliviousIndex) != nullptr. "
                            f"Address is not set for {kind} tensor {name}. Call setInputTensorAddress or "
                            "setTensorAddress before enqueue/execute.)")
                t = fake.resolve(ptr)
                if t is None:
                    return f"{kind} {name}: address {ptr:#x} is no live tensor (freed, or never a tensor's data_ptr)"
                offset = ptr - t.untyped_storage().data_ptr()
                if offset % ALIGNMENT:
                    return f"{kind} {name}: address is {offset} bytes into its allocation, not 256-byte aligned"
                want = TORCH[io["dtype"]]
                if t.dtype != want:
                    return f"{kind} {name}: bound a {t.dtype} buffer, the engine's tensor is {want}"
                if not t.is_contiguous():
                    return f"{kind} {name}: the bound buffer is not contiguous"
                need = int(np.prod(shape))
                if t.numel() < need:
                    return f"{kind} {name}: the bound buffer holds {t.numel()} elements, {list(shape)} needs {need}"
                return t.reshape(-1)[:need].view(shape)

            def execute_async_v3(self, stream_handle):
                if int(stream_handle) == 0:
                    fake.log("W", DEFAULT_STREAM_WARNING)
                missing = self.infer_shapes()
                if missing:
                    fake.log("E", "IExecutionContext::enqueueV3: Error Code 3: API Usage Error (Parameter check "
                                  f"failed, condition: allInputDimensionsSpecified(routine). {missing})")
                    return False
                feeds, outs = {}, {}
                for name in self.engine.names:
                    shape = tuple(self.get_tensor_shape(name))
                    got = self._buffer(name, shape)
                    if isinstance(got, str):
                        fake.log("E", got)
                        return False
                    (feeds if self.engine.io[name]["mode"] == TensorIOMode.INPUT else outs)[name] = got
                arrays = {n: t.detach().numpy() for n, t in feeds.items()}
                results = self.engine.session.run(list(outs), arrays)
                with torch.inference_mode():
                    for (name, dst), value in zip(outs.items(), results):
                        torch.Tensor.copy_(dst, torch.from_numpy(np.ascontiguousarray(value)))
                return True

        mod.Logger, mod.Builder, mod.OnnxParser, mod.Runtime = Logger, Builder, OnnxParser, Runtime
        mod.IProgressMonitor, mod.IBuilderConfig, mod.IOptimizationProfile = (IProgressMonitor, IBuilderConfig,
                                                                              IOptimizationProfile)
        mod.ICudaEngine, mod.IExecutionContext = ICudaEngine, IExecutionContext
        if major == 10:
            Builder.platform_has_fast_fp16 = property(lambda self: True)
        return mod

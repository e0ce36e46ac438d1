"""The accelerated layer on small networks: the interface, ONNX export + cache, selection and every named fallback,
and TensorRT at its import boundary (absent, bindings without libraries, libraries without a GPU, foreign engines).
"""
import json
import logging
import sys
import types
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from engines.accel import AUTO_ORDER, BuildOptions, Network, Preference, accelerate, auto_order, cosine
from engines.accel import backends, onnx_export
from engines.accel import tensorrt as trt_backend
from engines.accel.ops import grid_sample_3d, grid_sample_3d_gather
from engines.common.cache import ContentCache
from engines.common.errors import InputError


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(4, 8)
        self.out = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, x, scale):
        return self.out(F.silu(self.norm(self.conv(x)))) * scale[:, None, None, None], x.mean((1, 2, 3))


def toy_net(seed=0) -> Network:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(1)
    return Network("toy", Toy().eval(), lambda b: (torch.randn(b, 3, 16, 16, generator=gen),
                                                   torch.rand(b, generator=gen) + 0.5),
                   ("x", "scale"), ("y", "mean"), convolutional=True)


@pytest.fixture()
def opts(tmp_path):
    return BuildOptions(batches=(1, 2), cache=ContentCache(tmp_path / "cache"), engine_root=tmp_path / "trt")


def test_eager_runner_places_inputs_on_the_weights_device_and_dtype(opts):
    net = toy_net()
    net.module.to(torch.bfloat16)
    runner = accelerate(net, "eager", opts)
    y, m = runner(torch.randn(2, 3, 16, 16, dtype=torch.float64), torch.ones(2))
    assert y.dtype == torch.bfloat16 and runner.backend == "eager" and "bf16" in runner.summary


def test_onnxruntime_matches_eager_and_reuses_its_export(opts, caplog):
    net = toy_net()
    with caplog.at_level(logging.INFO, "broadcast_avatar.accel"):
        runner = accelerate(net, "onnxruntime", opts)
    assert runner.backend == "onnxruntime" and runner.parity > 0.99999
    assert "CPUExecutionProvider" in runner.summary and "exported" in runner.summary
    assert any("toy: running onnxruntime" in r.getMessage() for r in caplog.records)
    x, s = torch.randn(2, 3, 16, 16), torch.rand(2)
    got, ref = runner(x, s), net.module(x, s)
    assert all(cosine(a, b) > 0.99999 for a, b in zip(got, ref))
    again = accelerate(toy_net(), "onnxruntime", replace(opts, ort_threads=1))   # same profile: no second export
    assert "reused" in again.summary
    assert again.fn.session.get_session_options().intra_op_num_threads == 1
    entries = list((opts.cache.root / onnx_export.NAMESPACE).iterdir())
    assert len(entries) == 1
    assert {p.name for p in entries[0].iterdir()} >= {"model.onnx", "meta.json"}


def test_export_key_follows_weights_dtype_and_profile():
    a, b = toy_net(0), toy_net(1)
    assert onnx_export.export_key(a, torch.float32, 2) == onnx_export.export_key(toy_net(0), torch.float32, 2)
    assert onnx_export.export_key(a, torch.float32, 2) != onnx_export.export_key(b, torch.float32, 2)
    assert onnx_export.export_key(a, torch.float32, 2) != onnx_export.export_key(a, torch.float16, 2)
    wide = Network("toy", a.module, lambda n: (torch.randn(n, 3, 32, 32), torch.rand(n)), a.input_names,
                   a.output_names)
    assert onnx_export.export_key(wide, torch.float32, 2) != onnx_export.export_key(a, torch.float32, 2)
    # the batch is a dynamic axis: another trace batch is the same profile
    assert onnx_export.export_key(a, torch.float32, 1) == onnx_export.export_key(a, torch.float32, 2)


def test_export_is_stripped_of_metadata_and_hashes_the_same_in_two_caches(tmp_path):
    import onnx

    one = onnx_export.export_onnx(toy_net(), 2, ContentCache(tmp_path / "a"))
    two = onnx_export.export_onnx(toy_net(), 2, ContentCache(tmp_path / "b"))
    assert one.sha256 == two.sha256 and not one.reused
    model = onnx.load(str(one.path), load_external_data=False)
    assert model.producer_version == "" and len(model.metadata_props) == 0
    assert all(not n.doc_string and len(n.metadata_props) == 0 for n in model.graph.node)
    assert model.opset_import[0].version == onnx_export.OPSET
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_fp16_module_exports_an_fp16_graph(tmp_path):
    """TensorRT 11's only route to fp16 engines: the precision is in the ONNX dtypes."""
    import onnx

    net = toy_net()
    net.module.half()
    art = onnx_export.export_onnx(net, 1, ContentCache(tmp_path))
    model = onnx.load(str(art.path))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_gather_grid_sample_is_bit_identical_and_exports_without_gridsample(tmp_path):
    for dtype in (torch.float32, torch.float64):
        vol = torch.randn(2, 3, 5, 6, 7, dtype=dtype)
        grid = torch.rand(2, 4, 5, 6, 3, dtype=dtype) * 2.4 - 1.2          # some samples outside: zero padding
        assert torch.equal(grid_sample_3d_gather(vol, grid), F.grid_sample(vol, grid, align_corners=False))

    class Warp(nn.Module):
        def forward(self, vol, grid):
            return grid_sample_3d(vol, grid)

    import onnx

    net = Network("warp_toy", Warp(), lambda b: (torch.randn(b, 3, 5, 6, 7), torch.rand(b, 4, 5, 6, 3) * 2 - 1),
                  ("vol", "grid"), ("out",))
    net.module.register_buffer("anchor", torch.zeros(1))        # a parameter-free module still has a dtype/device
    art = onnx_export.export_onnx(net, 2, ContentCache(tmp_path))
    ops = {n.op_type for n in onnx.load(str(art.path)).graph.node}
    assert "GridSample" not in ops and "GatherElements" in ops
    runner = accelerate(net, "onnxruntime", BuildOptions(batches=(2,), cache=ContentCache(tmp_path)))
    vol, grid = torch.randn(3, 3, 5, 6, 7), torch.rand(3, 4, 5, 6, 3) * 2 - 1
    assert (runner(vol, grid) - F.grid_sample(vol, grid, align_corners=False)).abs().max() < 1e-5


def test_compile_runner_matches_eager(opts):
    opts.compiler = "aot_eager"            # dynamo capture + AOT autograd without a C++ build (inductor: benchmarks)
    runner = accelerate(toy_net(), "compile", opts)
    assert runner.backend == "compile" and runner.parity > 0.99999


def test_gpu_only_backends_fall_back_on_the_cpu_naming_why(opts):
    for backend, reason in (("cudagraphs", "CUDA graphs need a CUDA GPU; this network runs on cpu"),
                            ("tensorrt", "TensorRT is not installed")):
        runner = accelerate(toy_net(), backend, opts)
        assert runner.backend == "eager"
        assert runner.fallbacks and runner.fallbacks[0].startswith(f"{backend}: ")
        assert reason in runner.summary


def test_auto_picks_the_first_that_works_and_says_so(opts, caplog, monkeypatch):
    monkeypatch.setitem(backends.AUTO_ORDER, "cpu", ("tensorrt", "onnxruntime", "eager"))
    with caplog.at_level(logging.INFO, "broadcast_avatar.accel"):
        runner = accelerate(toy_net(), "auto", opts)
    assert runner.backend == "onnxruntime" and "tensorrt: TensorRT is not installed" in runner.summary
    assert runner.summary.startswith("toy: auto picked onnxruntime (")          # the node's text says it too
    assert any("auto picked onnxruntime" in r.getMessage() for r in caplog.records)
    # bf16 weights: onnxruntime has no bf16 kernels, so auto names that and runs eager
    net = toy_net()
    net.module.to(torch.bfloat16)
    runner = accelerate(net, "auto", opts)
    assert runner.backend == "eager" and "onnxruntime: onnxruntime has no bf16 kernels" in runner.summary


def test_auto_follows_a_network_s_own_preference_for_its_device(opts, caplog):
    net = toy_net()
    net.prefer = {"cpu": Preference(("onnxruntime",), "measured 3x eager on this toy")}
    assert auto_order(net) == (("onnxruntime", "eager"), "auto order on cpu: onnxruntime, eager (measured 3x eager "
                                                         "on this toy)")
    with caplog.at_level(logging.INFO, "broadcast_avatar.accel"):
        runner = accelerate(net, "auto", opts)
    assert runner.backend == "onnxruntime" and runner.parity >= 0.9999
    assert runner.summary.startswith("toy: auto picked onnxruntime (")
    assert runner.summary.endswith("; auto order on cpu: onnxruntime, eager (measured 3x eager on this toy)")
    assert [r.getMessage() for r in caplog.records if "toy: auto picked" in r.getMessage()] == [
        "[Broadcast Avatar] " + runner.summary]
    # a network without a preference keeps the device's order, and says why
    plain = accelerate(toy_net(), "auto", opts)
    assert plain.backend == "eager" and plain.summary.endswith(f"; auto order on cpu: eager ({backends.AUTO_WHY['cpu']})")
    net.prefer = {"cpu": Preference(("turbo",), "?")}
    with pytest.raises(ValueError, match="unknown backend"):
        auto_order(net)


class _OnCuda(Network):
    """The selection boundary on a faked CUDA device: `device` says cuda, the weights stay on the CPU."""

    @property
    def device(self):
        return torch.device("cuda", 0)


def test_auto_on_a_cuda_device_keeps_the_gpu_order_whatever_the_cpu_preference(opts, monkeypatch):
    base = toy_net()
    net = _OnCuda(base.name, base.module, base.example, base.input_names, base.output_names, convolutional=True,
                  prefer={"cpu": Preference(("onnxruntime",), "fast on a CPU")})
    assert auto_order(net)[0] == AUTO_ORDER["cuda"] == ("tensorrt", "cudagraphs", "eager")
    tried = []
    for name, real in list(backends.BUILDERS.items()):
        def record(n, o, name=name, real=real):
            tried.append(name)
            if name == "cudagraphs":       # no GPU here: what a failed capture on a real one looks like to auto
                raise backends.BackendUnavailable("capture failed (faked)")
            return real(n, o)
        monkeypatch.setitem(backends.BUILDERS, name, record)
    runner = accelerate(net, "auto", opts)
    assert tried == ["tensorrt", "cudagraphs", "eager"]
    assert runner.backend == "eager" and "onnxruntime" not in runner.summary.split("; auto order")[0]
    assert "tensorrt: TensorRT is not installed" in runner.summary and "cudagraphs: capture failed" in runner.summary
    assert runner.summary.endswith(f"; auto order on cuda: tensorrt, cudagraphs, eager ({backends.AUTO_WHY['cuda']})")
    assert runner.channels_last                      # eager on a GPU: channels-last for a convolutional network


def test_a_backend_that_computes_something_else_is_refused(opts, monkeypatch):
    real = backends.build_onnxruntime

    def wrong(net, o):
        runner = real(net, o)
        inner = runner.fn
        runner.fn = lambda *xs: tuple(-t for t in inner(*xs))
        return runner

    monkeypatch.setitem(backends.BUILDERS, "onnxruntime", wrong)
    runner = accelerate(toy_net(), "onnxruntime", opts)
    assert runner.backend == "eager" and "differs from eager PyTorch" in runner.summary


def test_a_crashing_backend_is_named_with_its_error(opts, monkeypatch):
    def crash(net, o):
        raise OSError("libgomp.so.1: cannot open shared object file")

    monkeypatch.setitem(backends.BUILDERS, "compile", crash)
    runner = accelerate(toy_net(), "compile", opts)
    assert runner.backend == "eager"
    assert "compile: failed with OSError: libgomp.so.1" in runner.summary


def test_unknown_backend_is_an_input_error():
    with pytest.raises(InputError, match="backend: expected one of auto, eager"):
        accelerate(toy_net(), "turbo")


# -- TensorRT at its import boundary ----------------------------------------------------------------------------
def _fake_package(root, body: str, dist: str = None):
    pkg = root / "tensorrt"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(body)
    if dist:
        info = root / f"tensorrt_cu12-{dist}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tensorrt-cu12\nVersion: {dist}\n")
    return root


@pytest.fixture()
def fake_path(tmp_path, monkeypatch):
    def install(body, dist=None):
        root = _fake_package(tmp_path / "site", body, dist)
        monkeypatch.syspath_prepend(str(root))
        monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
        import importlib
        importlib.invalidate_caches()
        return root
    yield install
    sys.modules.pop("tensorrt", None)


def test_tensorrt_bindings_without_libraries(fake_path, opts):
    fake_path("raise ImportError('libnvonnxparser.so.11: cannot open shared object file: No such file or "
              "directory')\n", dist="11.4.0.106")
    assert trt_backend.installed_version() == "11.4.0.106"
    with pytest.raises(trt_backend.TensorRTUnavailable) as err:
        trt_backend.probe(torch.device("cuda"))
    assert "TensorRT 11.4.0.106 Python bindings are installed but its libraries are not" in str(err.value)
    assert "libnvonnxparser.so.11" in str(err.value)
    runner = accelerate(toy_net(), "tensorrt", opts)
    assert runner.backend == "eager" and "libnvonnxparser" in runner.summary


NULLPTR_TRT = """
__version__ = "11.4.0.106"
class Logger:
    WARNING = 2
    def __init__(self, level): pass
class Runtime:
    def __init__(self, logger):
        raise TypeError("pybind11::init(): factory function returned nullptr")
"""


def test_tensorrt_libraries_without_a_usable_gpu(fake_path, monkeypatch):
    fake_path(NULLPTR_TRT)
    with pytest.raises(trt_backend.TensorRTUnavailable, match="needs a CUDA GPU; this network runs on cpu"):
        trt_backend.probe(torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(trt_backend.TensorRTUnavailable, match="PyTorch sees none"):
        trt_backend.probe(torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(trt_backend.TensorRTUnavailable) as err:
        trt_backend.probe(torch.device("cuda"))
    assert "11.4.0.106's libraries load but cannot start on this GPU" in str(err.value)
    assert "returned nullptr" in str(err.value) and "different libnvinfer" in str(err.value)


def _key(monkeypatch, version="10.15.1", cc=(12, 0), gpu="NVIDIA GeForce RTX 5090", onnx="ab" * 32):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: cc)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: gpu)
    return trt_backend.engine_key(version, torch.device("cuda", 0), "musetalk_unet", "fp16", (4, 1), onnx)


def test_engine_key_and_name_carry_version_gpu_precision_profile_and_graph_key(monkeypatch, tmp_path):
    key = _key(monkeypatch)
    assert key["batches"] == [1, 4] and key["compute_capability"] == "12.0" and key["tensorrt"] == "10.15.1"
    name = trt_backend.engine_path(tmp_path, key).name
    assert name.startswith("musetalk_unet_fp16_b1-4_trt10.15.1_sm120_") and name.endswith(".engine")
    others = [_key(monkeypatch, version="11.4.0.106"), _key(monkeypatch, cc=(9, 0), gpu="NVIDIA H200"),
              _key(monkeypatch, onnx="cd" * 32)]
    assert len({trt_backend.engine_path(tmp_path, k).name for k in [key, *others]}) == 4


class FakeTRT:
    """The slice of the TensorRT Python API the builder uses, as version 10 or 11 spells it (recording calls)."""

    def __init__(self, major: int, deserialize_ok: bool = True):
        self.major, self.calls, self.ok = major, [], deserialize_ok
        flags = {"STRONGLY_TYPED": 1} if major == 10 else {}
        if major == 10:
            flags["EXPLICIT_BATCH"] = 0
        self.NetworkDefinitionCreationFlag = types.SimpleNamespace(**flags)
        self.BuilderFlag = types.SimpleNamespace(FP16=0, BF16=1) if major == 10 else types.SimpleNamespace()
        self.MemoryPoolType = types.SimpleNamespace(WORKSPACE=0)
        self.__version__ = "10.15.1" if major == 10 else "11.4.0.106"
        fake = self

        class Logger:
            WARNING = 2

            def __init__(self, level):
                pass
        self.Logger = Logger

        class Tensor:
            def __init__(self, name, shape):
                self.name, self.shape = name, shape

        class Network:
            num_inputs = 1

            def get_input(self, i):
                return Tensor("x", (-1, 3, 16, 16))

        class Profile:
            def set_shape(self, name, lo, opt, hi):
                fake.calls.append(("profile", name, lo, opt, hi))

        class Config:
            def set_memory_pool_limit(self, pool, size):
                fake.calls.append(("workspace", size))

            def set_flag(self, flag):
                fake.calls.append(("flag", flag))

            def add_optimization_profile(self, p):
                fake.calls.append(("add_profile",))

        class Builder:
            def __init__(self, logger):
                pass

            def create_network(self, flags):
                fake.calls.append(("network", flags))
                return Network()

            def create_builder_config(self):
                return Config()

            def create_optimization_profile(self):
                return Profile()

            def build_serialized_network(self, network, config):
                return b"ENGINE-" + str(fake.major).encode()

        class OnnxParser:
            num_errors = 0

            def __init__(self, network, logger):
                pass

            def parse_from_file(self, path):
                fake.calls.append(("parse", path))
                return True
        self.Builder, self.OnnxParser = Builder, OnnxParser


@pytest.mark.parametrize("major", [10, 11])
def test_build_uses_strongly_typed_networks_and_no_removed_flags(major, tmp_path):
    fake = FakeTRT(major)
    data = trt_backend.build_engine(fake, tmp_path / "m.onnx", [4, 1])
    assert data == b"ENGINE-" + str(major).encode()
    assert ("network", 1 << 1 if major == 10 else 0) in fake.calls     # STRONGLY_TYPED where it exists
    assert not [c for c in fake.calls if c[0] == "flag"]                 # no BuilderFlag.FP16 on either API
    profiles = [c for c in fake.calls if c[0] == "profile"]
    assert profiles == [("profile", "x", (1, 3, 16, 16), (1, 3, 16, 16), (1, 3, 16, 16)),
                        ("profile", "x", (4, 3, 16, 16), (4, 3, 16, 16), (4, 3, 16, 16))]


def test_engine_from_another_gpu_or_version_is_not_loaded_but_rebuilt(monkeypatch, tmp_path):
    root = tmp_path / "broadcast_tensorrt"
    old = _key(monkeypatch, version="10.15.1", cc=(12, 0), gpu="NVIDIA GeForce RTX 5090")
    root.mkdir()
    old_path = trt_backend.engine_path(root, old)
    old_path.write_bytes(b"FOREIGN")
    old_path.with_suffix(".json").write_text(json.dumps(old))
    here = _key(monkeypatch, version="11.4.0.106", cc=(9, 0), gpu="NVIDIA H200")
    messages = []
    fake = trt_backend.TensorRT(FakeTRT(11), "11.4.0.106")
    data = trt_backend.load_or_build(fake, root, here, lambda: tmp_path / "m.onnx", [1, 4], messages.append)
    assert data == b"ENGINE-11"
    assert any("not loaded" in m and old_path.name in m and "tensorrt '10.15.1' (here '11.4.0.106')" in m
               for m in messages)
    new_path = trt_backend.engine_path(root, here)
    assert new_path.read_bytes() == b"ENGINE-11"
    assert json.loads(new_path.with_suffix(".json").read_text()) == here
    assert not list(root.glob(".*.tmp"))
    # second use: read back, no build
    messages.clear()
    onnx = lambda: tmp_path / "m.onnx"        # noqa: E731
    assert trt_backend.load_or_build(fake, root, here, onnx, [1, 4], messages.append) == b"ENGINE-11"
    assert not any("building" in m for m in messages)
    # a file under this name whose sidecar holds another key (copied from elsewhere) is rebuilt, not trusted
    new_path.with_suffix(".json").write_text(json.dumps(old))
    messages.clear()
    trt_backend.load_or_build(fake, root, here, lambda: tmp_path / "m.onnx", [1, 4], messages.append)
    assert any("does not match this machine; not loaded, rebuilding" in m for m in messages)

"""The GPU-only runners (TensorRT, CUDA graphs) executed against contract fakes of the real APIs (tests/fakes): the
fakes enforce what TensorRT 10/11 and torch's CUDA graphs enforce, so a wrong tensor name, a removed API name, a
missing address, a shape outside the engine's profiles or a stale graph fails here as it would on a GPU.

First the fakes themselves are shown to refuse what the real APIs refuse (a fake that accepts everything proves
nothing); then the runners, the shape policy, the graph cache and the engine cache run through them.
"""
import errno
import logging
import pathlib
import re
import shutil
from dataclasses import replace

import pytest
import torch

from engines.accel import BuildOptions, accelerate, cosine, graphs, network, onnx_export
from engines.accel import tensorrt as trt_backend
from engines.common.cache import ContentCache
from engines.ditto.pipeline import DittoPipeline
from engines.musetalk.accel import accelerate_musetalk
from engines.musetalk.avatar import build_avatar
from engines.musetalk.lipsync import LipSyncSettings, lipsync
from engines.musetalk.loader import load_musetalk
from tests.fakes.cuda_fake import NO_CAPTURE_REPLAY, NON_DEFAULT, FakeCuda
from tests.fakes.tensorrt_fake import DEFAULT_STREAM_WARNING, FakeTensorRT
from tests.fixtures.tiny_musetalk import speech_like
from tests.unit.test_accel import Toy, toy_net
# the tiny models and eager renders, shared with the GPU-path tests (module-scoped fixtures)
from tests.unit.test_accel_gpu_path import _dt_chain, dt_dir, dt_fp32, mt_dir, mt_loop  # noqa: F401


@pytest.fixture()
def gpu(monkeypatch):
    """The fake GPU: torch.cuda's stream/graph/device API on the CPU, which stands in for the CUDA device."""
    cuda = FakeCuda(capability=(8, 9)).install(monkeypatch)
    monkeypatch.setattr(network, "is_gpu", lambda device: True)
    yield cuda
    cuda.uninstall()


@pytest.fixture(params=[10, 11], ids=["trt10", "trt11"])
def trt(request, gpu, monkeypatch):
    return FakeTensorRT(request.param, cuda=gpu).install(monkeypatch)


@pytest.fixture()
def opts(tmp_path):
    return BuildOptions(batches=(2, 4), cache=ContentCache(tmp_path / "cache"), engine_root=tmp_path / "trt")


def _eager(net, *xs):
    with torch.inference_mode():
        out = net.module(*xs)
    return out if isinstance(out, tuple) else (out,)


def _engine(trt, tmp_path, batches=(2,)):
    net = toy_net()
    art = onnx_export.export_onnx(net, max(batches), ContentCache(tmp_path / "c"))
    data = trt_backend.build_engine(trt.module, art.path, batches)
    engine = trt.module.Runtime(trt.module.Logger()).deserialize_cuda_engine(data)
    return net, data, engine


# -- the fakes refuse what the real APIs refuse ---------------------------------------------------------------------
def test_tensorrt_fake_refuses_a_wrong_shape_a_missing_address_and_an_unknown_name(trt, tmp_path):
    net, _, engine = _engine(trt, tmp_path)
    assert [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)] == ["x", "scale", "y", "mean"]
    ctx = engine.create_execution_context()
    x, s = torch.randn(2, 3, 16, 16), torch.rand(2)
    assert ctx.set_input_shape("x", (2, 3, 16, 16)) and ctx.set_input_shape("scale", (2,))
    # outside the profile (batch 3 of a batch-2 engine), wrong rank, static dim changed: False, old shape kept
    assert not ctx.set_input_shape("x", (3, 3, 16, 16))
    assert "satisfyProfile" in trt.messages[-1][1]
    assert not ctx.set_input_shape("x", (2, 3, 16))
    assert not ctx.set_input_shape("x", (2, 3, 16, 17))
    assert tuple(ctx.get_tensor_shape("x")) == (2, 3, 16, 16)
    # unknown names: TensorRT's silent answers, recorded
    trt.violations.clear()
    assert not ctx.set_tensor_address("image", x.data_ptr())
    assert str(engine.get_tensor_dtype("image")) == "DataType.FLOAT"
    assert engine.get_tensor_mode("image") == trt.module.TensorIOMode.NONE
    assert len(trt.violations) == 3
    # a missing output address: refused, nothing run, outputs untouched
    y, m = torch.full((2, 3, 16, 16), 7.0), torch.full((2,), 7.0)
    for name, t in (("x", x), ("scale", s), ("y", y)):
        assert ctx.set_tensor_address(name, t.data_ptr())
    assert not ctx.execute_async_v3(0x10)
    assert "Address is not set for output tensor mean" in trt.messages[-1][1]
    assert (y == 7).all()
    # a buffer of another dtype, one that is freed, one off a 256-byte boundary: refused
    assert ctx.set_tensor_address("mean", torch.zeros(2).data_ptr())        # a temporary, freed at once
    assert not ctx.execute_async_v3(0x10) and "no live tensor" in trt.messages[-1][1]
    half = torch.zeros(2, dtype=torch.float16)
    assert ctx.set_tensor_address("mean", half.data_ptr())
    assert not ctx.execute_async_v3(0x10) and "float16" in trt.messages[-1][1]
    off = torch.zeros(2 + 64)[1:]
    assert ctx.set_tensor_address("mean", off.data_ptr())
    assert not ctx.execute_async_v3(0x10) and "256-byte" in trt.messages[-1][1]
    # everything right: it runs, writes in place, and matches eager (onnxruntime computes the engine's outputs)
    assert ctx.set_tensor_address("mean", m.data_ptr())
    assert ctx.execute_async_v3(0x10)
    ref = _eager(net, x, s)
    assert cosine(y, ref[0]) > 0.99999 and cosine(m, ref[1]) > 0.99999
    assert ctx.execute_async_v3(0) and trt.messages[-1] == ("W", DEFAULT_STREAM_WARNING)


def test_tensorrt_fake_has_each_major_s_names_and_refuses_foreign_plans(trt, tmp_path, gpu, monkeypatch):
    mod = trt.module
    if trt.major == 11:
        for gone in ("FP16", "BF16", "INT8"):
            assert not hasattr(mod.BuilderFlag, gone)
        assert not hasattr(mod.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH")
        assert mod.NetworkDefinitionCreationFlag.STRONGLY_TYPED == 0
        assert not hasattr(mod.Builder(mod.Logger()), "platform_has_fast_fp16")
    else:
        assert mod.NetworkDefinitionCreationFlag.STRONGLY_TYPED == 1
        builder = mod.Builder(mod.Logger())
        network_ = builder.create_network(1 << mod.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        mod.OnnxParser(network_, None).parse_from_file(
            str(onnx_export.export_onnx(toy_net(), 2, ContentCache(tmp_path / "c")).path))
        config = builder.create_builder_config()
        config.set_flag(mod.BuilderFlag.FP16)
        assert builder.build_serialized_network(network_, config) is None        # strongly typed + FP16
    with pytest.raises(RuntimeError, match="inconsistent"):
        mod.Builder(mod.Logger()).create_optimization_profile().set_shape("x", (4, 3), (2, 3), (4, 3))
    _, data, _ = _engine(trt, tmp_path)
    runtime = mod.Runtime(mod.Logger())
    assert runtime.deserialize_cuda_engine(b"not an engine") is None
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert runtime.deserialize_cuda_engine(data) is None and "incompatible device" in trt.messages[-1][1]


def test_graph_fake_refuses_a_wrong_shape_a_replay_without_capture_and_a_stale_graph(gpu):
    net = toy_net()
    x, s = torch.randn(2, 3, 16, 16), torch.rand(2)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        graph.replay()
    with pytest.raises(RuntimeError, match="non-default stream"):
        graph.capture_begin()
    with pytest.raises(RuntimeError, match="before any eager run"), torch.cuda.graph(graph):
        net.module(x, s)
    net.module(x, s)                                    # warm-up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = net.module(x, s)
    with pytest.raises(RuntimeError, match="broadcast or cast"):
        x.copy_(torch.randn(1, 3, 16, 16))              # real copy_ would broadcast this silently
    x.copy_(torch.randn(2, 3, 16, 16))
    graph.replay()
    assert cosine(out[0], _eager(net, x, s)[0]) > 0.999999
    with pytest.raises(RuntimeError, match="operation not permitted when stream is capturing"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            net.module(x, s)[1].sum().item()
    net.module.double().float()                         # the weights moved (ComfyUI offload + reload)
    with pytest.raises(RuntimeError, match="stale graph"):
        graph.replay()
    graph.reset()                                       # a freed graph is no graph: replay and pool refuse
    with pytest.raises(RuntimeError, match=re.escape(NO_CAPTURE_REPLAY)):
        graph.replay()
    with pytest.raises(RuntimeError, match="pool.. without a preceding successful capture"):
        graph.pool()
    assert gpu.graphs_alive == 0 and NON_DEFAULT


# -- the runners through the fakes --------------------------------------------------------------------------------
def _check_rows(runner, net, rows):
    for n in rows:
        x, s = torch.randn(n, 3, 16, 16), torch.rand(n) + 0.5
        got, ref = runner(x, s), _eager(net, x, s)
        assert got[0].shape[0] == n and got[1].shape == (n,), n
        assert min(cosine(g, r) for g, r in zip(got, ref)) > 0.99999, n


def test_tensorrt_runner_any_row_count_and_an_engine_cache_hit_needs_no_export(trt, opts, caplog):
    net = toy_net()
    with caplog.at_level(logging.INFO, "broadcast_avatar.accel"):
        runner = accelerate(net, "tensorrt", opts)
    assert runner.backend == "tensorrt" and runner.parity > 0.99999, runner.summary
    assert f"TensorRT {trt.version}" in runner.summary and trt.builds == 1
    _check_rows(runner, net, (1, 2, 3, 4, 5, 7, 9))        # the shape policy: built for 2 and 4 only
    assert trt.violations == [], trt.violations
    assert not [m for m in trt.messages if m[1] == DEFAULT_STREAM_WARNING]    # its own stream, never stream 0
    # a second load: the engine comes from models/broadcast_tensorrt, with the ONNX export gone from the cache
    shutil.rmtree(opts.cache.root / onnx_export.NAMESPACE)
    again = accelerate(toy_net(), "tensorrt", opts)
    assert again.backend == "tensorrt" and trt.builds == 1
    assert not (opts.cache.root / onnx_export.NAMESPACE).exists()          # nothing exported
    _check_rows(again, net, (3,))
    # other weights: another engine (the key follows the weights' fingerprint, not a file that may be gone)
    other = accelerate(toy_net(seed=5), "tensorrt", opts)
    assert other.backend == "tensorrt" and trt.builds == 2


def test_tensorrt_engine_cache_in_a_read_only_folder_gives_hits_and_one_note(trt, opts, caplog, monkeypatch):
    net = toy_net()
    accelerate(net, "tensorrt", opts)
    stored = sorted(p.name for p in opts.engine_root.iterdir())
    real_write = pathlib.Path.write_bytes

    def read_only(self, data):                          # what a read-only mount answers (root ignores chmod)
        if opts.engine_root in self.parents:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_write(self, data)
    monkeypatch.setattr(pathlib.Path, "write_bytes", read_only)
    trt_backend._read_only_said.clear()
    with caplog.at_level(logging.INFO, "broadcast_avatar.accel"):
        hit = accelerate(toy_net(), "tensorrt", opts)
        assert hit.backend == "tensorrt" and trt.builds == 1          # the stored engine: a hit, nothing deleted
        miss = accelerate(toy_net(seed=3), "tensorrt", opts)
        third = accelerate(toy_net(seed=4), "tensorrt", replace(opts, batches=(1,)))
    assert miss.backend == "tensorrt" and third.backend == "tensorrt" and trt.builds == 3
    notes = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(notes) == 1 and "Read-only file system" in notes[0], notes
    assert sorted(p.name for p in opts.engine_root.iterdir()) == stored
    _check_rows(miss, toy_net(seed=3), (3,))


def test_cudagraph_runner_copies_in_and_out_for_any_row_count(gpu, opts):
    net = toy_net()
    runner = accelerate(net, "cudagraphs", opts)
    assert runner.backend == "cudagraphs", runner.summary
    _check_rows(runner, net, (1, 2, 3, 4, 5, 8, 9))
    assert runner.fn.captures == 2 and gpu.graphs_alive == 2     # one graph per built batch (2, 4), reused
    # copy-out: a result kept from one call is not overwritten by the next replay
    x = torch.randn(4, 3, 16, 16)
    first = runner(x, torch.ones(4))[0]
    kept = first.clone()
    runner(torch.randn(4, 3, 16, 16), torch.ones(4))
    assert torch.equal(first, kept)


def test_cudagraph_cache_stays_bounded_over_offload_and_reload(gpu, opts):
    net = toy_net()
    runner = accelerate(net, "cudagraphs", opts)
    for cycle in range(6):
        _check_rows(runner, net, (4, 1))
        assert gpu.graphs_alive <= 2
        net.module.to(torch.float64)                    # ComfyUI offloads: every graph is freed right away
        assert gpu.graphs_alive == 0 and not runner.fn.graphs, cycle
        net.module.to(torch.float32)                    # and reloads: the next call captures again
    assert runner.fn.captures == 6 * 2
    # a runner per build (a loader built again) does not pile up either: the old runner's graphs go with the move
    for _ in range(3):
        accelerate(net, "cudagraphs", opts)(torch.randn(2, 3, 16, 16), torch.ones(2))
    net.module.to(torch.float64)
    assert gpu.graphs_alive == 0
    net.module.to(torch.float32)
    # at most MAX_GRAPHS shapes are kept, least recently used freed first
    wide = graphs.GraphRunner(net, max_graphs=2)
    for n in (1, 2, 3, 2, 4):
        wide(torch.randn(n, 3, 16, 16), torch.ones(n))
    assert [k[0][0][0] for k in wide.graphs] == [2, 4]


def test_compiled_static_shapes_see_only_the_built_batches(opts, monkeypatch):
    seen = []
    net = toy_net()
    opts.compiler = "aot_eager"
    runner = accelerate(net, "compile", opts)
    real = runner.fn
    runner.fn = lambda *xs: (seen.append(int(xs[0].shape[0])), real(*xs))[1]
    _check_rows(runner, net, (1, 3, 4, 6))
    assert set(seen) <= {2, 4}
    assert isinstance(net.module, Toy)


# -- whole renders through the fakes, frame counts that are not multiples of the batch ---------------------------


def _render_opts(tmp_path, batches):
    # compile through aot_eager: dynamo's capture at static shapes without inductor's C++ build (the GPU's is Triton)
    return BuildOptions(batches=batches, cache=ContentCache(tmp_path / "cache"), engine_root=tmp_path / "trt",
                        compiler="aot_eager")


FIXED_SHAPE = [("tensorrt", 10), ("tensorrt", 11), ("cudagraphs", None), ("compile", None)]


def _fakes_for(backend, major, request, monkeypatch):
    """The fake GPU for the GPU backends, and the TensorRT fake of `major` for TensorRT (None otherwise); compile runs
    on the CPU as it is (no global module hooks: torch.compile warns about them)."""
    if backend == "compile":
        return None
    gpu = request.getfixturevalue("gpu")
    return FakeTensorRT(major, cuda=gpu).install(monkeypatch) if major else None


@pytest.mark.parametrize("backend,major", FIXED_SHAPE)
def test_musetalk_renders_the_eager_frames_through_the_fixed_shape_backends(backend, major, request, monkeypatch,
                                                                            mt_dir, mt_loop, tmp_path):
    trt = _fakes_for(backend, major, request, monkeypatch)
    nets = load_musetalk(mt_dir, torch.float32)
    frames, track = mt_loop
    avatar = build_avatar(nets, frames, track, 10.0)
    summaries = accelerate_musetalk(nets, backend, _render_opts(tmp_path, (4,)))
    assert all(f": {backend} (" in s for s in summaries), summaries
    out = lipsync(nets, avatar, speech_like(0.7), LipSyncSettings(batch_size=4))
    eager_nets = load_musetalk(mt_dir, torch.float32)
    ref = lipsync(eager_nets, build_avatar(eager_nets, frames, track, 10.0), speech_like(0.7),
                  LipSyncSettings(batch_size=4))
    assert out.shape == ref.shape and out.shape[0] % 4, out.shape
    assert (out - ref).abs().max() < 2e-3, (out - ref).abs().max()
    assert trt is None or trt.violations == []


@pytest.mark.parametrize("backend,major", FIXED_SHAPE)
def test_ditto_renders_the_eager_frames_through_the_fixed_shape_backends(backend, major, request, monkeypatch,
                                                                         dt_dir, dt_fp32, tmp_path):
    trt = _fakes_for(backend, major, request, monkeypatch)
    pipeline = DittoPipeline(dt_dir)
    summaries = pipeline.accelerate(backend, _render_opts(tmp_path, (4,)))
    assert len(summaries) == 4 and all(f": {backend} (" in s for s in summaries), summaries
    motion, frames = _dt_chain(pipeline)                 # 25 frames through batch-4 networks: 6 x 4 + 1
    assert frames.shape == dt_fp32[1].shape and frames.shape[0] % 4
    assert abs(motion.motion - dt_fp32[0].motion).max() < 1e-3
    assert (frames - dt_fp32[1]).abs().max() < 5e-3
    assert trt is None or trt.violations == []


# -- precision: what `auto` (bf16 weights on Ampere and newer) gets from TensorRT -----------------------------------
def test_bf16_weights_get_an_fp16_engine_gated_against_fp32(trt, opts):
    net = toy_net()
    ref_net = toy_net()
    net.module.to(torch.bfloat16)
    runner = accelerate(net, "tensorrt", opts)
    assert runner.backend == "tensorrt" and runner.dtype == torch.float16, runner.summary
    assert "fp16 engine for bf16 weights, cos " in runner.summary and "vs fp32 when built" in runner.summary
    engine = runner.fn.engine
    assert str(engine.get_tensor_dtype("x")) == "DataType.HALF"           # precision from the ONNX dtypes
    x, s = torch.randn(3, 3, 16, 16), torch.rand(3) + 0.5
    got, ref = runner(x, s), _eager(ref_net, x, s)
    assert min(cosine(g, r) for g, r in zip(got, ref)) > 0.999
    assert trt.violations == []
    name = trt_backend.engine_path(opts.engine_root, trt_backend.engine_key(
        trt.version, net.device, net.name, "fp16", opts.batches,
        onnx_export.export_key(net, torch.float16, 4))).name
    assert "_fp16_" in name and (opts.engine_root / name).is_file()


def test_an_fp16_engine_that_overflows_is_refused_and_not_stored(trt, opts):
    net = toy_net()
    with torch.no_grad():
        net.module.out.weight.mul_(1e6)                 # fine in bf16 and fp32, far beyond fp16's 65504
    net.module.to(torch.bfloat16)
    runner = accelerate(net, "tensorrt", opts)
    assert runner.backend == "eager" and "engine differs from eager fp32" in runner.summary, runner.summary
    assert not list(opts.engine_root.glob("*.engine"))


def test_tensorrt_runner_never_ignores_a_refusal(trt, opts):
    """TensorRT answers a bad shape with False and keeps the old one (stale bindings if ignored): the runner raises.
    An engine without one of the network's tensor names is refused at load, named, and eager runs."""
    net = toy_net()
    runner = accelerate(net, "tensorrt", opts)
    runner(torch.randn(2, 3, 16, 16), torch.ones(2))
    with pytest.raises(RuntimeError, match="TensorRT refused shape .2, 3, 16, 17. for input 'x'"):
        runner.fn(torch.randn(2, 3, 16, 17), torch.ones(2))
    renamed = toy_net()
    renamed.input_names = ("image", "scale")                 # the stored engine's graph says "x"
    data = next(opts.engine_root.glob("*.engine")).read_bytes()
    with pytest.raises(trt_backend.TensorRTUnavailable, match=re.escape("the engine has no tensor(s) ['image']")):
        trt_backend.TensorRTRunner(trt_backend.TensorRT(trt.module, trt.version), data, renamed, torch.float32,
                                   opts.batches, renamed.device)

"""A contract fake of the CUDA side of torch that the accelerated runners use, for a machine without a GPU.

What it stands in for (patched onto ``torch.cuda`` by `install`; the CPU torch raises on every one of these):
``Stream`` (``cuda_stream`` handle, ``wait_stream``), ``current_stream``, the ``stream`` context, ``synchronize``,
``CUDAGraph`` (``capture_begin/capture_end/replay/reset/pool``), the ``graph`` capture context,
``graph_pool_handle``, ``is_current_stream_capturing``, and the device queries ``get_device_capability`` /
``get_device_name``. The "GPU" is the CPU: tensors stay CPU tensors; the runners' code runs unchanged.

What it enforces, as the real API does (texts from torch's CUDAGraph.cpp, see
../shared/reference/notes/tensorrt-cudagraph-api-contract.md section 2):

- capture only on a non-default stream, one capture at a time, into a graph that holds none yet; replay and pool
  only after a capture; ``reset`` frees the graph (and its pool record), after which it may capture again;
- warm-up: the captured module must have run eagerly before its capture (lazy initialisation is not capturable);
- no synchronising call inside a capture (``.item()``, ``.cpu()``, ``.numpy()``, ``.tolist()``,
  ``torch.cuda.synchronize``): "operation not permitted when stream is capturing", and the capture is then invalid;
- static buffers: a replay runs what was captured on the SAME tensor objects it captured (the module and its inputs
  as they were at capture) and writes the results into the outputs created during capture, in place. So new data
  must be copied into the static inputs (a runner that rebinds its input gets the old data back), results must be
  cloned out (the next replay overwrites them), and a ``copy_`` into a static input must match its shape and dtype
  exactly (real ``copy_`` broadcasts and casts silently: the fake raises instead);
- stale graphs: if the weights' storage or a static input's storage changed since capture (``.to()``, a cast,
  ComfyUI's offload and reload), ``replay`` raises (real CUDA would read freed memory: silent garbage or an illegal
  address).

A replay re-runs the captured module eagerly on the static inputs: a CPU cannot replay kernels, and the result is
what a correct replay computes.
"""
from __future__ import annotations

import contextlib
import itertools
import weakref

import torch

CAPTURING_ERROR = "CUDA error: operation not permitted when stream is capturing"
NON_DEFAULT = ("CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok to replay them "
               "on the default stream.)")
OWNS = "This CUDAGraph instance already owns a captured graph. To capture a new graph, create a new instance."
NO_CAPTURE_REPLAY = "Called CUDAGraph::replay without a preceding successful capture."
NO_CAPTURE_POOL = "Called CUDAGraph::pool() without a preceding successful capture."


class FakeCuda:
    """One fake GPU. `install(monkeypatch)` patches it in; its attributes record what happened (tests read them)."""

    def __init__(self, capability=(8, 9), name="Fake GPU (CPU stand-in)"):
        self.capability, self.name = tuple(capability), name
        self._handles = itertools.count(0x1000, 0x10)
        self.default = self.Stream_(self, 0)
        self.current = self.default
        self.capturing = None                  # the graph being captured
        self.run_modules: "weakref.WeakSet" = weakref.WeakSet()     # modules that ran eagerly (warm-up check)
        self.graphs_alive = 0                  # captured graphs not reset (pools held)
        self.captures = 0
        self.static_inputs: dict = {}          # id(tensor) -> (weakref, shape, dtype) of every live static input
        self._depth = 0

    # -- streams ---------------------------------------------------------------------------------------------------
    class Stream_:
        def __init__(self, fake, handle):
            self.fake, self.cuda_stream, self.waited = fake, handle, []

        def wait_stream(self, other):
            self.waited.append(other.cuda_stream)

        def synchronize(self):
            self.fake.check_not_capturing()

        def __eq__(self, other):
            return isinstance(other, FakeCuda.Stream_) and other.cuda_stream == self.cuda_stream

        def __hash__(self):
            return hash(self.cuda_stream)

    def new_stream(self, device=None, priority=0):
        return self.Stream_(self, next(self._handles))

    def current_stream(self, device=None):
        return self.current

    @contextlib.contextmanager
    def stream(self, s):
        before, self.current = self.current, (s if s is not None else self.current)
        try:
            yield
        finally:
            self.current = before

    def check_not_capturing(self, *_, **__):
        if self.capturing is not None:
            self.capturing.invalid = True
            raise RuntimeError(CAPTURING_ERROR)

    # -- graphs ------------------------------------------------------------------------------------------------------
    def graph_class(self):
        fake = self

        class CUDAGraph:
            def __init__(self, keep_graph=False):
                self.state, self.module, self.args, self.outputs, self.snapshot = "new", None, None, None, None
                self.invalid, self.stream = False, None

            def capture_begin(self, pool=None, capture_error_mode="global"):
                if self.state == "captured":
                    raise RuntimeError(OWNS)
                if fake.current.cuda_stream == 0:
                    raise RuntimeError(NON_DEFAULT)
                if fake.capturing is not None:
                    raise RuntimeError("another capture is under way (one capture per process at a time)")
                self.state, self.stream, self.pool_token = "capturing", fake.current, pool
                fake.capturing, fake._depth = self, 0

            def capture_end(self):
                if fake.capturing is not self:
                    raise RuntimeError("capture_end without capture_begin")
                fake.capturing = None
                if fake.current != self.stream:
                    raise RuntimeError("Capture must end on the same stream it began on.")
                if self.invalid:
                    self.state = "new"
                    raise RuntimeError("CUDA error: operation failed due to a previous error during capture")
                if self.module is None:
                    self.state = "new"
                    raise RuntimeError("The CUDA Graph is empty (the fake records the top-level module call made "
                                       "during capture; none was made)")
                self.state = "captured"
                fake.graphs_alive += 1
                fake.captures += 1

            def record(self, module, args, outputs):
                if module not in fake.run_modules:
                    self.invalid = True
                    raise RuntimeError(f"{type(module).__name__} is captured before any eager run: warm it up "
                                       "first (lazy initialisation is not capturable)")
                self.module, self.args = module, args
                self.outputs = tuple(o for o in (outputs if isinstance(outputs, tuple) else (outputs,)))
                self.snapshot = self._state()
                for a in args:
                    if isinstance(a, torch.Tensor):
                        fake.static_inputs[id(a)] = (weakref.ref(a), tuple(a.shape), a.dtype)

            def _state(self):
                tensors = [("weight " + n, t) for n, t in itertools.chain(self.module.named_parameters(),
                                                                          self.module.named_buffers())]
                tensors += [(f"input {i}", a) for i, a in enumerate(self.args) if isinstance(a, torch.Tensor)]
                return [(n, t.untyped_storage().data_ptr(), tuple(t.shape), t.dtype, t.stride()) for n, t in tensors]

            def replay(self):
                if self.state != "captured":
                    raise RuntimeError(NO_CAPTURE_REPLAY)
                fake.check_not_capturing()
                now = self._state()
                if now != self.snapshot:
                    changed = [a[0] for a, b in zip(self.snapshot, now) if a != b] or ["tensor set"]
                    raise RuntimeError(f"stale graph: {', '.join(changed[:3])} moved or changed since capture (the "
                                       "graph replays the old addresses: freed memory)")
                with torch.inference_mode():
                    fresh = self.module(*self.args)
                    fresh = fresh if isinstance(fresh, tuple) else (fresh,)
                    for o, f in zip(self.outputs, fresh):
                        o.copy_(f)

            def pool(self):
                if self.state != "captured":
                    raise RuntimeError(NO_CAPTURE_POOL)
                return ("pool", id(self))

            def reset(self):
                if self.state == "captured":
                    fake.graphs_alive -= 1
                for a in self.args or ():
                    fake.static_inputs.pop(id(a), None)
                self.state, self.module, self.args, self.outputs, self.snapshot = "new", None, None, None, None

            def __del__(self):
                if getattr(self, "state", None) == "captured":
                    fake.graphs_alive -= 1

        return CUDAGraph

    @contextlib.contextmanager
    def graph(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.check_not_capturing()
        side = stream if stream is not None else self._capture_stream
        with self.stream(side):
            cuda_graph.capture_begin(pool)
            try:
                yield
            except BaseException:
                with contextlib.suppress(RuntimeError):    # the error inside the capture is the one to see
                    cuda_graph.capture_end()
                raise
            cuda_graph.capture_end()

    # -- module calls: warm-up record and what a capture captures ------------------------------------------------------
    def _pre(self, module, args):
        if self._depth == 0 and self.capturing is None:
            self.run_modules.add(module)
        self._depth += 1

    def _post(self, module, args, output):
        self._depth -= 1
        if self._depth == 0 and self.capturing is not None:
            self.capturing.record(module, tuple(args), output)

    # -- copy_ into static inputs: exact shape and dtype -----------------------------------------------------------
    def _checked_copy(self, real_copy):
        fake = self

        def copy_(dst, src, non_blocking=False):
            entry = fake.static_inputs.get(id(dst))
            if entry is not None and entry[0]() is dst and isinstance(src, torch.Tensor):
                if tuple(src.shape) != entry[1] or src.dtype != entry[2]:
                    raise RuntimeError(f"copy into a graph's static input {entry[1]} {entry[2]} from "
                                       f"{tuple(src.shape)} {src.dtype}: real copy_ would broadcast or cast "
                                       "silently")
            return real_copy(dst, src, non_blocking)
        return copy_

    def install(self, monkeypatch) -> "FakeCuda":
        cuda = torch.cuda
        self._capture_stream = self.new_stream()
        monkeypatch.setattr(cuda, "Stream", self.new_stream)
        monkeypatch.setattr(cuda, "current_stream", self.current_stream)
        monkeypatch.setattr(cuda, "stream", self.stream)
        monkeypatch.setattr(cuda, "synchronize", self.check_not_capturing)
        monkeypatch.setattr(cuda, "CUDAGraph", self.graph_class())
        monkeypatch.setattr(cuda, "graph", self.graph)
        monkeypatch.setattr(cuda, "graph_pool_handle", lambda: ("pool", next(self._handles)))
        monkeypatch.setattr(cuda, "is_current_stream_capturing", lambda: self.capturing is not None)
        monkeypatch.setattr(cuda, "get_device_capability", lambda device=None: self.capability)
        monkeypatch.setattr(cuda, "get_device_name", lambda device=None: self.name)
        for name in ("item", "cpu", "numpy", "tolist"):
            real = getattr(torch.Tensor, name)

            def guarded(t, *a, _real=real, **k):
                if self.capturing is not None:
                    self.check_not_capturing()
                return _real(t, *a, **k)
            monkeypatch.setattr(torch.Tensor, name, guarded)
        monkeypatch.setattr(torch.Tensor, "copy_", self._checked_copy(torch.Tensor.copy_))
        pre = torch.nn.modules.module.register_module_forward_pre_hook(self._pre)
        post = torch.nn.modules.module.register_module_forward_hook(self._post)
        self._hooks = (pre, post)
        return self

    def uninstall(self) -> None:
        for h in getattr(self, "_hooks", ()):
            h.remove()

"""CUDA-graph capture and replay for one network: a bounded set of graphs, freed when the weights move.

A captured graph replays fixed device addresses: its static input buffers, the outputs it allocated in its private
memory pool, and the weights it read. So

- each graph is keyed on what changes the launches: the input shapes and dtypes (the batch sizes the shape policy
  allows, ``shapes.py``), never on where the weights happen to be;
- at most `MAX_GRAPHS` are kept, the least recently used freed first (its pool goes back to the allocator);
- when ComfyUI moves the weights (offload to the CPU and back, a cast: anything through ``Module._apply``) every
  graph is freed at once, before the move's own memory is needed; a replay never reads the old addresses, and
  offload/reload cycles never pile up graphs and pools for addresses that no longer hold the weights. A move that
  bypasses ``_apply`` is caught on the next call by the weights' storage changing.
- new data reaches a graph by an exact-shape ``copy_`` into its static inputs; results are cloned out (the next
  replay overwrites the static outputs in place).
"""
from __future__ import annotations

import types
import weakref
from collections import OrderedDict
from typing import Callable

import torch

from .network import Network, as_tuple

MAX_GRAPHS = 4          # one per batch size in use; the shape policy keeps a run to one or two

_watchers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()     # module -> {id: weak callback}


def _apply_and_report(self, fn, *args, **kwargs):
    for ref in list(_watchers.get(self, {}).values()):
        callback = ref()
        if callback is not None:
            callback()
    return type(self)._apply(self, fn, *args, **kwargs)


def on_weights_moved(module: torch.nn.Module, callback: Callable[[], None]) -> None:
    """Call `callback` (held weakly: a bound method of a runner) before any ``_apply`` (``.to()``, ``.cpu()``,
    ``.half()``, ComfyUI's offload) moves a tensor of `module`. Installed on every submodule owning tensors, so the
    parent's move and a per-layer move both report; installed once per submodule, however many runners watch."""
    ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else weakref.ref(callback)
    for m in module.modules():
        if not (m._parameters or m._buffers):
            continue
        if m not in _watchers:
            _watchers[m] = {}
            # a bound method (not a closure): a deepcopy of the module rebinds it to the copy, which reports nothing
            m._apply = types.MethodType(_apply_and_report, m)
        _watchers[m][id(ref)] = ref


def _storage(net: Network) -> tuple:
    """Where the weights are now (checked on every call: one C call per tensor, microseconds)."""
    return tuple(t.data_ptr() for t in net.tensors())


class GraphRunner:
    """One captured CUDA graph per input signature, replayed on static input buffers (module docstring)."""

    def __init__(self, net: Network, max_graphs: int = MAX_GRAPHS):
        self.net, self.max_graphs = net, int(max_graphs)
        self.graphs: "OrderedDict[tuple, tuple]" = OrderedDict()
        self._weights = None              # the weights' storage the graphs read (checked on every call)
        self.captures = 0                 # graphs captured so far (the benchmarks and tests read it)
        on_weights_moved(net.module, self.release)

    def release(self) -> None:
        """Free every graph and its pool (reset first: the graph's memory goes back even if a caller kept an
        output)."""
        for graph, _, _ in self.graphs.values():
            graph.reset()
        self.graphs.clear()
        self._weights = None

    def _capture(self, inputs):
        static = [x.clone() for x in inputs]
        side = torch.cuda.Stream(inputs[0].device)
        side.wait_stream(torch.cuda.current_stream(inputs[0].device))
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(3):                       # warm-up: cuDNN autotuning and lazy allocations
                self.net.module(*static)
        torch.cuda.current_stream(inputs[0].device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.inference_mode():
            out = as_tuple(self.net.module(*static))
        self.captures += 1
        return graph, static, out

    def __call__(self, *inputs):
        weights = _storage(self.net)
        if weights != self._weights:           # moved without _apply (or first call): nothing old is replayed
            self.release()
            self._weights = weights
        key = tuple((tuple(x.shape), x.dtype, x.device) for x in inputs)
        if key in self.graphs:
            self.graphs.move_to_end(key)
        else:
            while len(self.graphs) >= self.max_graphs:
                graph, _, _ = self.graphs.popitem(last=False)[1]
                graph.reset()
            self.graphs[key] = self._capture(inputs)
        graph, static, out = self.graphs[key]
        with torch.inference_mode():        # the static buffers may be inference tensors (captured under it)
            for s, x in zip(static, inputs):
                s.copy_(x)
            graph.replay()
        res = tuple(o.clone() for o in out)   # in the caller's mode: the next replay overwrites `out`
        return res[0] if len(res) == 1 else res

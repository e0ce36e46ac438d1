"""ONNX exports of the pack's networks, made once per shape profile and kept in the content-hash cache.

Choices (measured on torch 2.9 / onnx 1.23 / onnxruntime 1.32, see docs/accel.md):
- the legacy TorchScript exporter at opset 17, batch axis dynamic: it needs no onnxscript, its bytes are identical
  across processes, and ORT and TensorRT 10/11 both take opset 17. The dynamo exporter at opset < 18 writes a
  ``Split(num_outputs)`` that ORT rejects, and 5-D ``grid_sample`` is avoided by exporting its gather form
  (``ops.grid_sample_3d``).
- precision comes from the module's dtype: an fp16 module exports an fp16 graph, which is how TensorRT 11 (strongly
  typed networks only, no ``BuilderFlag.FP16``) gets an fp16 engine.
- always written with external data (``model.onnx`` + ``model.onnx.data``): the full MuseTalk UNet in fp32 is over
  protobuf's 2 GB limit, and one layout for every network keeps one code path.
- the graph's metadata (producer version, doc strings, metadata_props) is stripped before it is hashed and stored,
  so the hash (part of the TensorRT engine key) changes only when the graph or the weights do.
"""
from __future__ import annotations

import atexit
import copy
import hashlib
import logging
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from ..common.cache import ContentCache, content_hash
from .network import Network, place
from .precision import name_of

log = logging.getLogger("broadcast_avatar.accel")

NAMESPACE = "accel_onnx"
FORMAT_VERSION = 1
OPSET = 17
MODEL_FILE = "model.onnx"
DATA_FILE = "model.onnx.data"


@dataclass(frozen=True)
class OnnxArtifact:
    path: Path          # model.onnx (its external data beside it)
    sha256: str         # of the stripped graph and its data
    key: str            # the cache key it was stored under
    reused: bool        # found in the cache (no export this time)


def export_key(net: Network, dtype: torch.dtype, batch: int) -> str:
    """Everything the exported graph depends on; the batch size is dynamic, the other dims are the profile."""
    shapes = [(tuple(x.shape[1:]), str(x.dtype)) for x in net.example(batch)]
    return content_hash("accel-onnx", FORMAT_VERSION, net.name, net.fingerprint(), name_of(dtype), shapes, OPSET,
                        torch.__version__.split("+")[0], list(net.input_names), list(net.output_names))


def strip_metadata(model) -> None:
    """Remove what changes with the exporter's version or the source layout, not with the graph."""
    model.producer_version = ""
    model.doc_string = ""
    del model.metadata_props[:]
    model.graph.doc_string = ""
    for node in model.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]


def file_sha256(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        if not p.is_file():
            continue
        h.update(f"{p.name}:{p.stat().st_size};".encode())
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


_scratch: Optional[ContentCache] = None


def _scratch_cache() -> ContentCache:
    """Without a cache (a script, a test), exports live in a temporary folder removed at exit."""
    global _scratch
    if _scratch is None:
        root = tempfile.mkdtemp(prefix="ba-accel-onnx-")
        atexit.register(shutil.rmtree, root, True)
        _scratch = ContentCache(root)
    return _scratch


def export_onnx(net: Network, batch: int = 1, cache: Optional[ContentCache] = None,
                dtype: Optional[torch.dtype] = None,
                before: Optional[Callable[[torch.nn.Module], None]] = None) -> OnnxArtifact:
    """Export `net` in `dtype` (default: its weights'), traced at `batch` with the batch axis dynamic, or reuse the
    cached export. In another dtype than the weights' (TensorRT's fp16 engine for bf16 weights) the export is made
    from a CPU copy of the module, so the GPU never holds a second copy; `before(copy)` sees that copy in fp32
    first (the fp32 reference of the engine's parity gate)."""
    import onnx

    cache = cache or _scratch_cache()
    dtype = dtype or net.dtype
    key = export_key(net, dtype, batch)
    entry = cache.load(NAMESPACE, key, FORMAT_VERSION)
    if entry is not None and (entry.path / MODEL_FILE).is_file():
        return OnnxArtifact(entry.path / MODEL_FILE, entry.meta["sha256"], key, True)
    log.info("[Broadcast Avatar] %s: exporting to ONNX (%s, once per weights and shape profile; kept in %s)",
             net.name, name_of(dtype), cache.root)
    module, device = net.module, net.device
    if dtype != net.dtype or before is not None:
        module, device = copy.deepcopy(net.module).to("cpu", torch.float32).eval(), torch.device("cpu")
        if before is not None:
            before(module)
        module.to(dtype)
    inputs = place(net.example(batch), device, dtype)
    cache.root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".onnx-export-", dir=cache.root) as tmp:
        raw = Path(tmp) / "raw.onnx"
        axes = {n: {0: "batch"} for n in [*net.input_names, *net.output_names]}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # TracerWarnings about shape-dependent Python ints: shapes are fixed
            torch.onnx.export(module, inputs, str(raw), input_names=list(net.input_names),
                              output_names=list(net.output_names), dynamic_axes=axes, opset_version=OPSET,
                              do_constant_folding=True, dynamo=False)
        model = onnx.load(str(raw), load_external_data=True)
        strip_metadata(model)
        staged = Path(tmp) / "staged"
        staged.mkdir()
        onnx.save_model(model, str(staged / MODEL_FILE), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=DATA_FILE, size_threshold=1024)
        del model
        digest = file_sha256(staged / MODEL_FILE, staged / DATA_FILE)

        def move_in(folder: Path) -> None:
            for name in (MODEL_FILE, DATA_FILE):
                if (staged / name).is_file():
                    os.replace(staged / name, folder / name)

        entry = cache.store(NAMESPACE, key, FORMAT_VERSION, {}, {"sha256": digest, "network": net.name,
                                                                 "dtype": name_of(dtype), "opset": OPSET},
                            write_files=move_in)
    return OnnxArtifact(entry.path / MODEL_FILE, digest, key, False)

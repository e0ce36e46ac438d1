"""The content-hash cache: one keyed store for everything computed once and reused.

Mask sequences, voice prompts, MuseTalk avatars, Ditto packets and audio features all live here. An entry is a
folder ``<root>/<namespace>/<key>/`` holding ``tensors.safetensors`` and ``meta.json``. The key is a hash of the
input content, the parameters and a format version, so a change of any of them is a miss, never a stale hit.

Guarantees:
- writes go to a temporary folder that is renamed into place only when complete, so a crash or an interrupt never
  leaves an entry that looks valid;
- reads are memory-mapped (the tensors are views on the file, not copies);
- an entry that is corrupt or was written under another format version is deleted and reported as a miss.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np
import torch

TENSORS_FILE = "tensors.safetensors"
META_FILE = "meta.json"

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


def content_hash(*items: Any) -> str:
    """A stable hex digest of tensors, arrays, strings, numbers and (nested) dicts/lists of them.

    Tensors are hashed by dtype, shape and bytes, frame by frame, so a clip is never copied whole.
    """
    h = hashlib.blake2b(digest_size=20)
    for item in items:
        _feed(h, item)
    return h.hexdigest()


def _feed(h, item: Any) -> None:
    if isinstance(item, torch.Tensor):
        t = item.detach()
        h.update(f"tensor:{t.dtype}:{tuple(t.shape)};".encode())
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        rows = t.reshape(-1, *t.shape[2:]) if t.dim() > 2 else t.reshape(1, -1)
        for row in rows:  # one frame (or row) at a time: bounded extra memory
            h.update(np.ascontiguousarray(row.cpu().numpy()).data)
    elif isinstance(item, np.ndarray):
        h.update(f"array:{item.dtype}:{item.shape};".encode())
        h.update(np.ascontiguousarray(item).data)
    elif isinstance(item, (bytes, bytearray, memoryview)):
        h.update(b"bytes:" + bytes(item))
    elif isinstance(item, Mapping):
        h.update(b"dict{")
        for k in sorted(item, key=str):
            _feed(h, str(k))
            _feed(h, item[k])
        h.update(b"}")
    elif isinstance(item, (list, tuple)):
        h.update(b"list[")
        for x in item:
            _feed(h, x)
        h.update(b"]")
    else:
        h.update(f"{type(item).__name__}:{item!r};".encode())


@dataclass(frozen=True)
class CacheEntry:
    """A loaded entry: memory-mapped tensors plus the JSON metadata stored with them."""

    path: Path
    tensors: dict
    meta: dict


class ContentCache:
    """A folder of content-addressed entries, grouped by namespace (one per kind of thing cached)."""

    def __init__(self, root: os.PathLike | str):
        self.root = Path(root)

    def entry_path(self, namespace: str, key: str) -> Path:
        return self.root / namespace / key

    def load(self, namespace: str, key: str, version: int) -> Optional[CacheEntry]:
        """Return the entry, or `None` on a miss. A corrupt or other-version entry is removed first."""
        path = self.entry_path(namespace, key)
        if not path.is_dir():
            return None
        try:
            with open(path / META_FILE, encoding="utf-8") as f:
                stored = json.load(f)
            if stored.get("format_version") != version or stored.get("namespace") != namespace:
                raise ValueError("format version changed")
            tensors = load_safetensors_mmap(path / TENSORS_FILE)
        except Exception:
            shutil.rmtree(path, ignore_errors=True)
            return None
        return CacheEntry(path=path, tensors=tensors, meta=stored.get("meta", {}))

    def store(self, namespace: str, key: str, version: int, tensors: Mapping[str, torch.Tensor],
              meta: Optional[Mapping[str, Any]] = None) -> CacheEntry:
        """Write an entry atomically and return it loaded back (memory-mapped)."""
        from safetensors.torch import save_file

        final = self.entry_path(namespace, key)
        tmp = final.parent / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True, exist_ok=False)
        try:
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp / TENSORS_FILE))
            with open(tmp / META_FILE, "w", encoding="utf-8") as f:
                json.dump({"format_version": version, "namespace": namespace, "meta": dict(meta or {})}, f)
            if final.exists():  # a concurrent writer (or a stale entry) got there first: replace it
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        entry = self.load(namespace, key, version)
        if entry is None:
            raise RuntimeError(f"cache entry {final} could not be read back after writing")
        return entry


def load_safetensors_mmap(path: os.PathLike | str) -> dict:
    """Open a .safetensors file as memory-mapped, read-only CPU tensors (no copy of the data)."""
    path = Path(path)
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        size = os.fstat(f.fileno()).st_size
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    base = 8 + header_len
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES[info["dtype"]]
        start, end = info["data_offsets"]
        if end == start:
            out[name] = torch.empty(info["shape"], dtype=dtype)
            continue
        buf = np.frombuffer(mm, dtype=np.uint8, count=end - start, offset=base + start)
        # The mapping is read-only; torch warns about non-writable arrays, which these deliberately are.
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out[name] = torch.frombuffer(buf, dtype=dtype).reshape(info["shape"])
    return out

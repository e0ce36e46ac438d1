"""A cheap fingerprint of model files, part of every cache key built from their outputs.

Hashing a multi-GB checkpoint on every load would cost seconds; names, sizes and the first and last bytes change
with any real replacement of a file (a re-download, another release, a different quantisation). For a
``.safetensors`` file the header is hashed too: it lists every tensor's name, dtype, shape and offsets, so a file
of the same size with other tensors differs even where its edges happen to match.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

SAFETENSORS_HEADER_LIMIT = 100_000_000  # a larger "header" is not one: hash its edges only


def file_fingerprint(paths: Iterable[os.PathLike | str], edge_bytes: int = 65536) -> str:
    """Hex digest over each file (sorted by path) of its name, size, ``.safetensors`` header and first and last
    `edge_bytes` bytes."""
    h = hashlib.blake2b(digest_size=16)
    for p in sorted(Path(p) for p in paths):
        size = p.stat().st_size
        h.update(f"{p.name}:{size};".encode())
        with open(p, "rb") as f:
            if p.suffix == ".safetensors":
                head = f.read(8)
                if len(head) == 8:
                    h.update(f.read(min(int.from_bytes(head, "little"), SAFETENSORS_HEADER_LIMIT)))
                f.seek(0)
            h.update(f.read(edge_bytes))
            f.seek(max(0, size - edge_bytes))
            h.update(f.read(edge_bytes))
    return h.hexdigest()


def source_identity(path: os.PathLike | str, name: str, edge_bytes: int = 65536) -> dict:
    """What identifies a source file the user picked, without reading it whole: its `name` as the user picked it
    (relative to ComfyUI's input folder), its size, its modification time in nanoseconds and a digest of its first
    and last `edge_bytes` bytes (so a file replaced by another of the same size with its old mtime still differs).
    Part of the keys of entries found from that file (engines/common/source_cache.py)."""
    st = os.stat(path)
    return {"name": str(name), "size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "edges": file_fingerprint([path], edge_bytes)}

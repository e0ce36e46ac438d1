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
from typing import Iterable, Optional

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
    Part of the keys of entries found from that file (engines/common/source_cache.py).

    A model folder (SAM3, OmniVoice: a Hugging Face folder picked by name) is identified by every file in it
    (hidden ones aside): each one's path inside the folder, size and mtime_ns, and the digest over all of them."""
    if os.path.isdir(path):
        root = Path(path)
        files = sorted(p for p in root.rglob("*") if p.is_file()
                       and not any(part.startswith(".") for part in p.relative_to(root).parts))
        listing = []
        for p in files:
            st = p.stat()
            listing.append([p.relative_to(root).as_posix(), int(st.st_size), int(st.st_mtime_ns)])
        return {"name": str(name), "files": listing, "edges": file_fingerprint(files, edge_bytes)}
    st = os.stat(path)
    return {"name": str(name), "size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
            "edges": file_fingerprint([path], edge_bytes)}


def named_files(name: str, folders: Iterable[os.PathLike | str], edge_bytes: int = 65536) -> Optional[list]:
    """The identities (`source_identity`) of the files or folders called `name` (a relative name, as a combo
    widget holds it) inside any of `folders`, one per distinct file, in an order that does not depend on which
    folder holds it; None where there is none (the value is not a file name). What makes a model or input file
    part of a cache key (`prompt_graph.upstream_signature`'s `identify`): the same name with other bytes is
    another key."""
    if not isinstance(name, str) or not name or len(name) > 1024 or "\0" in name:
        return None
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts:
        return None
    found, seen = [], set()
    for base in folders:
        candidate = Path(base) / rel
        try:
            if not candidate.exists():
                continue
            real = candidate.resolve()
            if real in seen:
                continue
            seen.add(real)
            found.append(source_identity(candidate, name, edge_bytes))
        except OSError:  # unreadable: not identified by it (the loader will say what is wrong)
            continue
    if not found:
        return None
    return sorted(found, key=lambda ident: ident["edges"])

"""Cold boots: a cached avatar or packet found from the file the user picked, without decoding or hashing it.

The content-hash entries (MuseTalk avatars, Ditto packets) are keyed by the frames themselves, so finding one means
decoding and hashing the whole loop first: seconds for a long 1080p clip. A *source link* is a second, small entry
keyed by what produced the frames instead: the signature of the graph that feeds the node (its loader nodes and
their settings, every picked file replaced by its `fingerprint.source_identity`: name, size, mtime_ns and a digest
of its first and last bytes; see `prompt_graph.source_signature`) plus the node's own settings and model
fingerprints. The link names the content entry it stands for and may carry tensors of its own (MuseTalk stores the
loop's frames there, uint8, since its avatar entry holds no frames). On a hit both are read memory-mapped and nothing
is decoded.

Why it cannot go stale: any change of the file (size, mtime, edges), of a loader setting or of the node's settings
is another key; the content entry it names is itself keyed by content, so it is exactly what those frames built;
and a link whose content entry was evicted, or whose recorded shape differs from it, is a miss (the clip is then
decoded and both are written again). Where no identity is known (frames from any other node), there is no link and
the content-hash path is used as before.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import torch

from .cache import CacheEntry, ContentCache, content_hash

SUFFIX = "_source"            # a link lives in the namespace of its content entry plus this suffix
LINK_VERSION = 1
CHECKED_META = ("frames", "width", "height")   # must agree between a link and its content entry


def link_namespace(namespace: str) -> str:
    return f"{namespace}{SUFFIX}"


def link_key(kind: str, signature: Any, *params: Any) -> str:
    """The key of a link: `kind` (what is cached), the source signature and everything else the entry depends on."""
    return content_hash("source-link", kind, LINK_VERSION, signature, list(params))


def resolve(cache: Optional[ContentCache], namespace: str, key: Optional[str],
            version: int) -> Optional[tuple[CacheEntry, CacheEntry]]:
    """``(link entry, content entry)`` for link `key` of `namespace`'s entries written under `version`, or None
    (no cache, no key, no link, the content entry gone or not the one the link recorded)."""
    if cache is None or key is None:
        return None
    link = cache.load(link_namespace(namespace), key, LINK_VERSION)
    if link is None:
        return None
    target_key = link.meta.get("target")
    target = cache.load(namespace, target_key, version) if isinstance(target_key, str) else None
    if target is None or link.meta.get("target_version") != version or any(
            link.meta.get(k) != target.meta.get(k) for k in CHECKED_META):
        return None
    return link, target


def exists(cache: Optional[ContentCache], namespace: str, key: Optional[str], version: int) -> bool:
    """Whether `resolve` would hit (a full memory-mapped load, so a corrupt entry is removed now, not later)."""
    return resolve(cache, namespace, key, version) is not None


def store_link(cache: Optional[ContentCache], namespace: str, key: Optional[str], version: int, target_key: str,
               target_meta: Mapping, tensors: Optional[Mapping[str, torch.Tensor]] = None,
               meta: Optional[Mapping] = None) -> Optional[CacheEntry]:
    """Write the link `key` -> content entry `target_key` (whose meta is `target_meta`), with optional `tensors`;
    None without a cache or a key."""
    if cache is None or key is None:
        return None
    recorded = {k: target_meta.get(k) for k in CHECKED_META}
    return cache.store(link_namespace(namespace), key, LINK_VERSION, dict(tensors or {}),
                       {**dict(meta or {}), **recorded, "target": target_key, "target_version": version})

"""The mask sequence cache: segment a loop once, reuse its masks on every later wardrobe run.

Key = hash(source frames, prompt, the graph that produced the masks with its model and input files by identity,
format version), so a different clip, prompt, segmenter setting or model file is a miss, never a stale hit. Storage is lossless: masks that are exactly 0/1 are bit-packed (1 bit per pixel), anything else
is kept as float32. Entries live in the pack's content-hash cache (`engines.common.cache`), written atomically.

Tests and other families may fill the cache with known masks through `store_masks` under the same key the node
computes (`mask_key`), which is how the CI runs skip the segmenter.
"""
from __future__ import annotations

import weakref
from typing import Any, Optional, Sequence

import numpy as np
import torch

from ..common.cache import ContentCache, content_hash
from ..common.errors import InputError

NAMESPACE = "wardrobe_masks"
VERSION = 3  # 2: keyed by the producing graph, not a hand-typed params string; 3: its files by identity

_KEYS: dict = {}  # id(frames tensor) -> (weak reference to it, prompt, producer digest, key)


def mask_key(images: torch.Tensor, prompt: str, producer: Any = None) -> str:
    """Cache key of a mask sequence made from ``images`` with ``prompt`` by ``producer``.

    ``producer`` describes what made the masks: the node passes the signature of the graph feeding its mask inputs
    (`engines.common.prompt_graph.upstream_signature`: segmenter model, thresholds, prompts, interval...), so a
    changed setting is a miss without anyone having to describe it by hand; its model files and input files
    count by identity (`nodes.sources.picked_file`), so a model or mask video replaced under its old name is a
    miss too.
    """
    producer_digest = content_hash(producer)
    # The node asks twice per run (before and after its lazy inputs) with the same tensor object; hashing a long
    # 1080p clip takes seconds, so the key is remembered for that object only. A weak reference, not the address,
    # identifies it: a freed clip's memory can be reused by another clip of the same shape.
    hit = _KEYS.get(id(images))
    if hit is not None and hit[0]() is images and hit[1] == prompt and hit[2] == producer_digest:
        return hit[3]
    key = content_hash("wardrobe-mask-sequence", VERSION, images, str(prompt), producer_digest)
    for k in [k for k, v in _KEYS.items() if v[0]() is None]:
        del _KEYS[k]
    try:
        _KEYS[id(images)] = (weakref.ref(images), prompt, producer_digest, key)
    except TypeError:  # an object that cannot be weakly referenced is simply not remembered
        pass
    return key


def _encode(mask: torch.Tensor) -> dict:
    m = mask.detach().float().cpu().contiguous()
    binary = bool(((m == 0) | (m == 1)).all())
    if binary:
        packed = np.packbits(m.numpy().astype(np.uint8).reshape(-1))
        return {"bits": torch.from_numpy(packed)}
    return {"values": m}


def store_masks(cache: ContentCache, key: str, masks: Sequence[Optional[torch.Tensor]], meta: Optional[dict] = None):
    """Write the mask sequences (None = slot unused) under ``key``; returns the loaded-back masks."""
    tensors, shapes = {}, []
    for i, m in enumerate(masks):
        if m is None:
            shapes.append(None)
            continue
        if m.dim() == 2:
            m = m[None]
        for name, t in _encode(m).items():
            tensors[f"{i}.{name}"] = t
        shapes.append(list(m.shape))
    if not tensors:
        raise InputError("masks", "at least one mask sequence to store", "none")
    cache.store(NAMESPACE, key, VERSION, tensors, {"shapes": shapes, **(meta or {})})
    return load_masks(cache, key)


def load_masks(cache: ContentCache, key: str) -> Optional[list]:
    """The stored mask sequences (float32 ``[F, H, W]`` or None per slot), or None on a miss."""
    entry = cache.load(NAMESPACE, key, VERSION)
    if entry is None:
        return None
    out = []
    for i, shape in enumerate(entry.meta.get("shapes", [])):
        if shape is None:
            out.append(None)
            continue
        n = int(np.prod(shape))
        if f"{i}.bits" in entry.tensors:
            bits = entry.tensors[f"{i}.bits"].numpy()
            flat = np.unpackbits(bits, count=n).astype(np.float32)
            out.append(torch.from_numpy(flat).reshape(shape))
        else:
            out.append(entry.tensors[f"{i}.values"].clone().reshape(shape))
    return out


def has_masks(cache: ContentCache, key: str) -> bool:
    """Cheap existence test used before deciding whether the segmenter must run."""
    # A full (memory-mapped) load, so a corrupt entry is removed now and counts as a miss, not later as an error.
    return cache.load(NAMESPACE, key, VERSION) is not None


def masks_for(cache: ContentCache, key: str, frames_shape: Sequence[int], given: Sequence[Optional[torch.Tensor]],
              refresh: bool = False, meta: Optional[dict] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The Mask Sequence Cache node's job: the entry under ``key``, or ``given`` checked and stored on a miss.

    ``frames_shape`` is the source frames' ``[F, H, W, C]``; ``given`` the (masks, masks_2) inputs, None where not
    evaluated or not linked. Returns the two mask sequences (the second zeros when only one was stored).
    """
    loaded = None if refresh else load_masks(cache, key)
    if loaded is None:
        if given[0] is None:
            raise InputError("masks", "masks to store (the cache entry is missing or unreadable)", "nothing",
                             "Queue the workflow again: the segmenter will run this time.")
        frames, height, width = int(frames_shape[0]), int(frames_shape[1]), int(frames_shape[2])
        for name, m in zip(("masks", "masks_2"), given):
            if m is not None and (m.shape[0] != frames or tuple(m.shape[1:]) != (height, width)):
                raise InputError(name, f"{frames} masks of {width}x{height} (one per frame)",
                                 f"{m.shape[0]} of {m.shape[2]}x{m.shape[1]}")
        loaded = store_masks(cache, key, list(given), meta)
    first = loaded[0]
    second = loaded[1] if len(loaded) > 1 and loaded[1] is not None else first.new_zeros(first.shape)
    return first, second

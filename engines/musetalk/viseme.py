"""Viseme cache: a keyframe whose audio window repeats reuses the mouth made for it, skipping the UNet and the VAE.

A broadcast repeats itself (a looped script, a sign-off, the same phrase twice, pauses); the same sounds make the
same mouth. Each keyframe's lookup key comes from its 50-token audio window:

- ``threshold >= 1`` (fuzzy, the posts' SimHash): the window's 384-wide mean vector, centred on the clip's mean
  window, projected on 64 fixed orthonormal directions (seeded, so every run hashes alike); bit i is 1 where the
  projection is >= 0. A keyframe hits a cached mouth whose hash differs in at most `threshold` bits (2 = the posts'
  value, "< 3 %"), whichever loop frame it was made on: only the mouth-only window is pasted, so a pose a few
  pixels off never paints a second nose (the posts' fix).
- ``threshold == 0`` (exact): the bytes of the window itself and the loop frame under it. A hit then has exactly
  the UNet input of the keyframe it replaces, so the clip is bit-identical to one rendered without the cache.

A cached mouth is the UNet's latent (so the SLERP infill around a reused keyframe is unchanged) and the decoded
face's pixels inside the window the paste-back reads (`blend.MouthPaster.read_window`; about a sixth of the 256
crop). The cache holds at most `capacity` mouths and drops the least recently used first, so its memory is bounded
(about 150 kB a mouth on the CPU). It lives for one render: the centring, and the exact keys' loop frames, belong
to that clip and avatar.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional, Union

import torch

HASH_BITS = 64
OFF = -1                       # the threshold that disables the cache
EXACT = 0
POSTS_THRESHOLD = 2            # Hamming bits (of 64) the posts accept as the same viseme
MAX_THRESHOLD = HASH_BITS // 2
DEFAULT_CAPACITY = 512
MAX_CAPACITY = 8192
_PLANES_SEED = 0x5EED_715E


def hyperplanes(width: int, bits: int = HASH_BITS, seed: int = _PLANES_SEED) -> torch.Tensor:
    """``[width, bits]`` float64 orthonormal directions (QR of a seeded Gaussian), the same for every run."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(width, bits, generator=g, dtype=torch.float64))
    return q


def simhash(window_means: torch.Tensor) -> torch.Tensor:
    """SimHash bits ``[N, 64]`` (bool) of ``[N, D]`` window means, centred on their mean over the clip.

    Whisper's window means share a large common component; through the origin (the posts' planes) most bits would
    then say the same for every window. Centred, each bit splits the clip's windows, so a Hamming distance of 2
    means a near-duplicate sound.
    """
    w = window_means.to(torch.float64)
    centred = w - w.mean(dim=0, keepdim=True)
    return (centred @ hyperplanes(w.shape[1])) >= 0


def hash_hex(bits: torch.Tensor) -> str:
    """The 64 bits as 16 hex digits (bit 0 first), for logs and tests."""
    value = 0
    for i, b in enumerate(bits.tolist()):
        value |= int(b) << i
    return f"{value:016x}"


def exact_key(padded: torch.Tensor, start: int, steps: int, loop_frame: int) -> bytes:
    """Digest of a window's bytes (`steps` padded feature steps from `start`) and the loop frame under it."""
    window = padded[start:start + steps].detach().to("cpu").contiguous()
    h = hashlib.blake2b(window.numpy().tobytes(), digest_size=20)
    h.update(str(tuple(window.shape)).encode())
    h.update(int(loop_frame).to_bytes(8, "little", signed=True))
    return h.digest()


@dataclass
class CachedMouth:
    """One mouth: the keyframe's UNet latent ``[4, 32, 32]`` (set when the UNet has run) and its decoded face's
    pixels inside the paste window ``[3, r1 - r0, c1 - c0]`` (set when the VAE has decoded it)."""

    frame: int
    latent: Optional[torch.Tensor] = None
    window: Optional[torch.Tensor] = None


Key = Union[bytes, torch.Tensor]


class VisemeCache:
    """Least-recently-used store of mouths keyed by SimHash (``threshold >= 1``) or exact window digest (0)."""

    def __init__(self, threshold: int = POSTS_THRESHOLD, capacity: int = DEFAULT_CAPACITY):
        if not EXACT <= int(threshold) <= MAX_THRESHOLD:
            raise ValueError(f"threshold must be 0..{MAX_THRESHOLD}, got {threshold}")
        if not 1 <= int(capacity) <= MAX_CAPACITY:
            raise ValueError(f"capacity must be 1..{MAX_CAPACITY}, got {capacity}")
        self.threshold, self.capacity = int(threshold), int(capacity)
        self.lookups = self.hits = self.evictions = 0
        self._entries: "OrderedDict[int, tuple[Key, CachedMouth]]" = OrderedDict()   # slot -> (key, mouth), LRU
        self._exact: dict[bytes, int] = {}
        self._bits = torch.zeros(self.capacity, HASH_BITS, dtype=torch.bool)         # fuzzy keys by slot
        self._free = list(range(self.capacity - 1, -1, -1))

    @property
    def exact(self) -> bool:
        return self.threshold == EXACT

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: Key) -> Optional[CachedMouth]:
        """The cached mouth for `key` (marked most recently used), or None."""
        self.lookups += 1
        slot = self._find(key)
        if slot is None:
            return None
        self._entries.move_to_end(slot)
        self.hits += 1
        return self._entries[slot][1]

    def _find(self, key: Key) -> Optional[int]:
        if not self._entries:
            return None
        if self.exact:
            return self._exact.get(key)
        slots = torch.tensor(list(self._entries.keys()), dtype=torch.long)
        dist = (self._bits[slots] != key[None]).sum(dim=1)
        best = int(torch.argmin(dist))         # the nearest; ties go to the least recently used (first in order)
        return int(slots[best]) if int(dist[best]) <= self.threshold else None

    def insert(self, key: Key, mouth: CachedMouth) -> None:
        """Store `mouth` under `key`, dropping the least recently used mouth when full."""
        if not self._free:
            old_slot, (old_key, _) = self._entries.popitem(last=False)
            if self.exact:
                self._exact.pop(old_key, None)
            self._free.append(old_slot)
            self.evictions += 1
        slot = self._free.pop()
        if self.exact:
            self._exact[key] = slot
        else:
            self._bits[slot] = key
        self._entries[slot] = (key, mouth)

    def summary(self) -> str:
        rate = 100.0 * self.hits / max(1, self.lookups)
        mode = "exact" if self.exact else f"Hamming <= {self.threshold} of {HASH_BITS} bits"
        return (f"viseme cache ({mode}): {self.hits} of {self.lookups} keyframes reused ({rate:.1f} %), "
                f"{len(self)} mouths held (cap {self.capacity}), {self.evictions} dropped")

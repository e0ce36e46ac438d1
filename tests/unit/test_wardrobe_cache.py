"""Mask sequence cache: lossless, keyed by frames + prompt + params, corrupt entries are misses."""
import pytest
import torch

from engines.common.cache import ContentCache
from engines.common.errors import InputError
from engines.wardrobe import maskcache as MC


def test_round_trip_is_lossless(tmp_path):
    cache = ContentCache(tmp_path)
    frames = torch.rand(3, 20, 30, 3)
    binary = (torch.rand(3, 20, 30) > 0.5).float()
    soft = torch.rand(3, 20, 30)
    key = MC.mask_key(frames, "dress\nhands", "sam3 t=0.25")
    assert not MC.has_masks(cache, key) and MC.load_masks(cache, key) is None
    MC.store_masks(cache, key, [binary, soft])
    loaded = MC.load_masks(cache, key)
    assert torch.equal(loaded[0], binary) and torch.equal(loaded[1], soft)
    entry = cache.load(MC.NAMESPACE, key, MC.VERSION)
    assert "0.bits" in entry.tensors and entry.tensors["0.bits"].numel() == 3 * 20 * 30 // 8  # 1 bit per pixel


def test_key_depends_on_content_prompt_and_params():
    frames = torch.rand(2, 8, 8, 3)
    k = MC.mask_key(frames, "dress", "a")
    assert k == MC.mask_key(frames.clone(), "dress", "a")
    assert k != MC.mask_key(frames, "dress", "b") and k != MC.mask_key(frames, "coat", "a")
    other = frames.clone()
    other[1, 3, 3, 0] += 0.01
    assert k != MC.mask_key(other, "dress", "a")


def test_corrupt_entry_is_a_miss(tmp_path):
    cache = ContentCache(tmp_path)
    key = MC.mask_key(torch.rand(1, 4, 4, 3), "p", "")
    MC.store_masks(cache, key, [torch.ones(1, 4, 4), None])
    (cache.entry_path(MC.NAMESPACE, key) / "tensors.safetensors").write_bytes(b"garbage")
    assert not MC.has_masks(cache, key)
    assert MC.load_masks(cache, key) is None


def test_reused_memory_is_never_a_stale_key():
    """A freed clip's memory reused by a different clip of the same shape must be hashed again."""
    keys = set()
    for i in range(4):
        frames = torch.zeros(2, 8, 8, 3)
        frames[1, 3, 3, 0] = i  # off any sparse sampling lattice
        keys.add(MC.mask_key(frames, "p", ""))
        del frames
    assert len(keys) == 4


def test_masks_for_stores_on_a_miss_reads_on_a_hit_and_checks_the_masks(tmp_path):
    cache = ContentCache(tmp_path)
    frames = torch.rand(3, 6, 8, 3)
    key = MC.mask_key(frames, "dress", "graph")
    masks = (torch.rand(3, 6, 8) > 0.5).float()
    first, second = MC.masks_for(cache, key, frames.shape, (masks, None))
    assert torch.equal(first, masks) and torch.equal(second, torch.zeros_like(masks))  # unused slot: zeros
    # On a hit the segmenter was not evaluated: nothing is given, the entry answers.
    again, _ = MC.masks_for(cache, key, frames.shape, (None, None))
    assert torch.equal(again, masks)
    # refresh overwrites; a miss with nothing to store, or masks that do not fit the frames, is refused by name.
    other = 1 - masks
    assert torch.equal(MC.masks_for(cache, key, frames.shape, (other, None), refresh=True)[0], other)
    with pytest.raises(InputError, match="masks.*missing or unreadable"):
        MC.masks_for(cache, "0" * 64, frames.shape, (None, None))
    with pytest.raises(InputError, match=r"masks_2.*3 masks of 8x6"):
        MC.masks_for(cache, "1" * 64, frames.shape, (masks, torch.zeros(2, 6, 8)))
    assert MC.load_masks(cache, "1" * 64) is None  # nothing stored half-way

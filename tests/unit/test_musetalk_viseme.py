"""The viseme cache on its own: SimHash keys, exact keys, Hamming lookups, the LRU bound, the paste window."""
import pytest
import torch

from engines.musetalk.blend import MouthPaster, mouth_mask
from engines.musetalk.viseme import (HASH_BITS, CachedMouth, VisemeCache, exact_key, hash_hex, hyperplanes,
                                     simhash)


def test_hyperplanes_are_orthonormal_and_the_same_every_run():
    p = hyperplanes(384)
    assert p.shape == (384, HASH_BITS)
    assert torch.allclose(p.T @ p, torch.eye(HASH_BITS, dtype=torch.float64), atol=1e-10)
    assert torch.equal(p, hyperplanes(384))


def test_simhash_is_centred_on_the_clip():
    g = torch.Generator().manual_seed(1)
    means = torch.randn(40, 384, generator=g, dtype=torch.float64)
    bits = simhash(means)
    assert bits.shape == (40, HASH_BITS) and bits.dtype == torch.bool
    # a component every window shares (Whisper's common offset) does not move a single bit
    assert torch.equal(simhash(means + 5.0 * torch.randn(1, 384, generator=g, dtype=torch.float64)), bits)
    # centred, each bit splits the clip: no bit says the same for every window
    assert not (bits.all(dim=0) | (~bits).all(dim=0)).any()
    # a near-duplicate window (a little noise) lands within a few bits; an unrelated one about half away
    twin = means.clone()
    twin[1] = means[0] + 1e-3 * torch.randn(384, generator=g, dtype=torch.float64)
    b = simhash(twin)
    assert int((b[0] != b[1]).sum()) <= 2
    assert 16 < int((b[0] != b[2]).sum()) < 48
    assert len(hash_hex(bits[0])) == 16


def test_exact_keys_follow_the_window_bytes_and_the_loop_frame():
    padded = torch.randn(60, 5, 384)
    padded[30:40] = padded[0:10]
    assert exact_key(padded, 0, 10, 2) == exact_key(padded, 30, 10, 2)
    assert exact_key(padded, 0, 10, 2) != exact_key(padded, 30, 10, 3)        # another loop frame
    nudged = padded.clone()
    nudged[35, 0, 0] = torch.nextafter(nudged[35, 0, 0], torch.tensor(10.0))  # one float one ulp away
    assert exact_key(nudged, 30, 10, 2) != exact_key(padded, 30, 10, 2)


def test_fuzzy_lookup_takes_the_nearest_within_the_threshold():
    cache = VisemeCache(threshold=2, capacity=8)
    a = torch.zeros(HASH_BITS, dtype=torch.bool)
    b = a.clone()
    b[:10] = True
    ma, mb = CachedMouth(frame=0), CachedMouth(frame=1)
    cache.insert(a, ma)
    cache.insert(b, mb)
    near_b = b.clone()
    near_b[20:22] = True                                   # 2 bits from b, 12 from a
    assert cache.lookup(near_b) is mb
    far = b.clone()
    far[20:23] = True                                      # 3 bits from b
    assert cache.lookup(far) is None
    assert (cache.lookups, cache.hits) == (2, 1)


def test_exact_lookup_needs_the_same_key():
    cache = VisemeCache(threshold=0, capacity=4)
    m = CachedMouth(frame=3)
    cache.insert(b"k1", m)
    assert cache.lookup(b"k1") is m and cache.lookup(b"k2") is None


def test_the_cache_holds_at_most_its_capacity_least_recently_used_first():
    cache = VisemeCache(threshold=0, capacity=2)
    mouths = [CachedMouth(frame=i) for i in range(3)]
    cache.insert(b"0", mouths[0])
    cache.insert(b"1", mouths[1])
    assert cache.lookup(b"0") is mouths[0]                 # 0 is now the most recently used
    cache.insert(b"2", mouths[2])                          # drops 1
    assert len(cache) == 2 and cache.evictions == 1
    assert cache.lookup(b"1") is None and cache.lookup(b"0") is mouths[0] and cache.lookup(b"2") is mouths[2]
    assert "2 mouths held (cap 2), 1 dropped" in cache.summary()


def test_bad_cache_settings():
    with pytest.raises(ValueError):
        VisemeCache(threshold=-1)
    with pytest.raises(ValueError):
        VisemeCache(threshold=2, capacity=0)


@pytest.mark.parametrize("side", [200, 256, 420])
def test_the_paste_reads_only_the_cached_window(side):
    paster = MouthPaster(mouth_mask())
    r0, r1, c0, c1 = paster.read_window({(side, side), (side + 7, side - 5)})
    assert 0 < r0 < r1 < 256 and 0 < c0 < c1 < 256
    g = torch.Generator().manual_seed(0)
    face = torch.rand(3, 256, 256, generator=g)
    only_window = torch.zeros_like(face)
    only_window[:, r0:r1, c0:c1] = face[:, r0:r1, c0:c1]
    frame = torch.rand(side + 40, side + 40, 3, generator=g)
    for box in [(10, 12, 10 + side, 12 + side), (3, 5, 3 + side - 5, 5 + side + 7)]:
        a, b = frame.clone(), frame.clone()
        paster.paste(a, face, box)
        paster.paste(b, only_window, box)
        assert torch.equal(a, b)

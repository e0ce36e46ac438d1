"""engines.common.cache: content keys, atomic writes, memory-mapped reads, corrupt and old entries rebuilt."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engines.common import cache as cache_mod
from engines.common.cache import META_FILE, TENSORS_FILE, ContentCache, content_hash


@pytest.fixture
def store(tmp_path):
    return ContentCache(tmp_path / "cache")


def test_round_trip_keeps_values_dtypes_and_meta(store):
    tensors = {"f32": torch.randn(3, 4), "u8": torch.arange(10, dtype=torch.uint8),
               "bf16": torch.randn(5).to(torch.bfloat16), "flag": torch.tensor([True, False])}
    store.store("masks", "k1", 1, tensors, {"fps": 25.0, "name": "clip"})
    entry = store.load("masks", "k1", 1)
    assert entry is not None and entry.meta == {"fps": 25.0, "name": "clip"}
    for name, t in tensors.items():
        assert entry.tensors[name].dtype == t.dtype
        assert torch.equal(entry.tensors[name], t)


def test_miss_is_none(store):
    assert store.load("masks", "absent", 1) is None


def test_reads_are_memory_mapped_views_of_the_file(store):
    entry = store.store("ns", "k", 1, {"x": torch.zeros(1024, dtype=torch.float32)})
    path = entry.path / TENSORS_FILE
    loaded = store.load("ns", "k", 1).tensors["x"]
    # Overwrite the data bytes in place: a memory-mapped tensor sees the change, a copy would not.
    raw = path.read_bytes()
    header = 8 + int.from_bytes(raw[:8], "little")
    with open(path, "r+b") as f:
        f.seek(header)
        f.write(np.full(4, 7.0, dtype=np.float32).tobytes())
    assert loaded[:4].tolist() == [7.0, 7.0, 7.0, 7.0]
    assert loaded[4:].abs().sum() == 0


def test_other_format_version_is_a_miss_and_removed(store):
    entry = store.store("ns", "k", 1, {"x": torch.ones(2)})
    assert store.load("ns", "k", 2) is None
    assert not entry.path.exists()


@pytest.mark.parametrize("damage", ["truncate_tensors", "garbage_meta", "missing_tensors", "wrong_namespace"])
def test_corrupt_entry_is_a_miss_and_removed(store, damage):
    entry = store.store("ns", "k", 3, {"x": torch.arange(100, dtype=torch.float32)}, {"a": 1})
    tensors, meta = entry.path / TENSORS_FILE, entry.path / META_FILE
    if damage == "truncate_tensors":
        tensors.write_bytes(tensors.read_bytes()[:50])
    elif damage == "garbage_meta":
        meta.write_text("{not json")
    elif damage == "missing_tensors":
        tensors.unlink()
    else:
        meta.write_text(json.dumps({"format_version": 3, "namespace": "other", "meta": {}}))
    assert store.load("ns", "k", 3) is None
    assert not entry.path.exists()
    # and it can be rebuilt
    assert store.store("ns", "k", 3, {"x": torch.ones(1)}).tensors["x"].item() == 1.0


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_failed_or_interrupted_write_leaves_nothing(store, monkeypatch, error):
    import safetensors.torch

    def failing_save(tensors, filename, *a, **k):
        with open(filename, "wb") as f:
            f.write(b"partial")
        raise error

    monkeypatch.setattr(safetensors.torch, "save_file", failing_save)
    with pytest.raises(type(error)):
        store.store("ns", "k", 1, {"x": torch.ones(3)})
    assert store.load("ns", "k", 1) is None
    leftovers = list((store.root / "ns").iterdir()) if (store.root / "ns").exists() else []
    assert leftovers == [], f"partial files left behind: {leftovers}"


def test_store_replaces_an_existing_entry(store):
    store.store("ns", "k", 1, {"x": torch.zeros(2)})
    store.store("ns", "k", 1, {"x": torch.ones(2)})
    assert store.load("ns", "k", 1).tensors["x"].tolist() == [1.0, 1.0]
    assert [p.name for p in (store.root / "ns").iterdir()] == ["k"]


def test_content_hash_is_stable_and_sensitive():
    frames = torch.rand(4, 8, 8, 3)
    key = content_hash(frames, {"threshold": 0.5, "prompt": "jacket"}, 1)
    assert key == content_hash(frames.clone(), {"prompt": "jacket", "threshold": 0.5}, 1)  # dict order ignored
    changed = frames.clone()
    changed[3, 7, 7, 2] += 1e-3
    assert content_hash(changed, {"threshold": 0.5, "prompt": "jacket"}, 1) != key
    assert content_hash(frames, {"threshold": 0.6, "prompt": "jacket"}, 1) != key
    assert content_hash(frames, {"threshold": 0.5, "prompt": "jacket"}, 2) != key
    assert content_hash(frames.reshape(4, 64, 3)) != content_hash(frames)  # shape is part of the key
    assert content_hash(frames.to(torch.bfloat16)) != content_hash(frames.to(torch.float16))
    assert content_hash(np.zeros(3)) != content_hash(np.zeros(3, dtype=np.float32))
    assert content_hash("1") != content_hash(1)


def test_module_documents_its_file_names():
    assert cache_mod.TENSORS_FILE.endswith(".safetensors") and cache_mod.META_FILE.endswith(".json")

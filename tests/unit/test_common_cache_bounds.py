"""engines.common.cache under a size cap: LRU eviction that spares entries being read, clearing a namespace,
entries larger than the cap, the log line, processes writing, reading and evicting one folder together, and a
writer whose fresh entry is retired under it."""
from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engines.common import cache as cache_mod
from engines.common.cache import ContentCache

MIB = 1 << 20
REPO_ROOT = Path(__file__).resolve().parents[2]


def blob(value: float, mib: float = 1.0) -> dict:
    return {"x": torch.full((int(mib * MIB) // 4,), float(value), dtype=torch.float32)}


def keys(store, namespace="ns"):
    return sorted(p.name for _used, _size, p in store.entries(namespace))


def test_least_recently_used_entries_go_first_and_the_cache_stays_under_its_cap(tmp_path):
    store = ContentCache(tmp_path, max_bytes=int(3.5 * MIB))
    for i in range(3):
        store.store("ns", f"k{i}", 1, blob(i))
    assert store.load("ns", "k0", 1) is not None          # k0 used last: k1 is now the oldest
    gc.collect()
    store.store("ns", "k3", 1, blob(3))
    assert keys(store) == ["k0", "k2", "k3"]
    assert store.size_bytes() <= store.max_bytes
    for i in range(4, 10):
        store.store("ns", f"k{i}", 1, blob(i))
        assert store.size_bytes() <= store.max_bytes
    assert keys(store) == ["k7", "k8", "k9"]
    assert [p for p in (tmp_path / "ns").iterdir() if p.name.startswith(".")] == []   # nothing left behind


def test_an_entry_being_read_is_never_evicted(tmp_path):
    store = ContentCache(tmp_path, max_bytes=int(2.5 * MIB))
    held = store.store("ns", "held", 1, blob(7)).tensors["x"]   # a live view on the mapped file
    for i in range(5):
        store.store("ns", f"k{i}", 1, blob(i))
    assert "held" in keys(store)
    assert float(held[123]) == 7.0
    assert store.load("ns", "held", 1) is not None
    gc.collect()
    del held
    gc.collect()                                                # the last view gone: the lock is released
    store.store("ns", "k9", 1, blob(9))
    store.store("ns", "k10", 1, blob(10))
    assert "held" not in keys(store)
    assert store.size_bytes() <= store.max_bytes


def test_clear_one_namespace_keeps_the_others(tmp_path):
    store = ContentCache(tmp_path, max_bytes=None)
    for ns in ("a", "b"):
        for i in range(3):
            store.store(ns, f"k{i}", 1, blob(i, 0.01))
    gc.collect()
    assert store.clear("a") == 3
    assert keys(store, "a") == [] and keys(store, "b") == ["k0", "k1", "k2"]
    assert store.load("a", "k0", 1) is None and store.load("b", "k0", 1) is not None
    assert [p.name for p in (tmp_path / "a").iterdir()] == []


def test_an_entry_larger_than_the_cap_is_returned_but_not_kept(tmp_path, caplog):
    store = ContentCache(tmp_path, max_bytes=MIB)
    entry = store.store("ns", "big", 1, blob(5, 2.0), {"a": 1})
    assert entry.path is None and entry.meta == {"a": 1} and float(entry.tensors["x"][0]) == 5.0
    assert store.load("ns", "big", 1) is None and store.size_bytes() == 0
    assert "larger than the cache's cap" in caplog.text and cache_mod.MAX_GB_ENV in caplog.text


@pytest.mark.parametrize("raw, expected", [("", 20 << 30), ("0.5", 1 << 29), ("none", None), ("2", 2 << 30)])
def test_cap_is_settable_from_the_environment(monkeypatch, raw, expected):
    monkeypatch.setenv(cache_mod.MAX_GB_ENV, raw)
    assert cache_mod.default_max_bytes() == expected
    assert ContentCache("unused").max_bytes == expected


@pytest.mark.parametrize("raw", ["lots", "-1", "nan"])
def test_a_bad_cap_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv(cache_mod.MAX_GB_ENV, raw)
    with pytest.raises(ValueError, match=cache_mod.MAX_GB_ENV):
        cache_mod.default_max_bytes()


@pytest.mark.parametrize("raw", ["lots", "-1", "nan"])
def test_a_server_keeps_the_default_cap_and_names_a_bad_one(monkeypatch, raw):
    """A running server (nodes/comfy_bridge.cache) never fails a node on a typo: the default cap and the problem."""
    monkeypatch.setenv(cache_mod.MAX_GB_ENV, raw)
    max_bytes, problem = cache_mod.max_bytes_or_default()
    assert max_bytes == cache_mod.DEFAULT_MAX_GB << 30
    assert cache_mod.MAX_GB_ENV in problem and repr(raw) in problem and "default cap of 20 GiB" in problem
    monkeypatch.setenv(cache_mod.MAX_GB_ENV, "2")
    assert cache_mod.max_bytes_or_default() == (2 << 30, None)


def test_describe_gives_size_entries_and_cap(tmp_path):
    store = ContentCache(tmp_path, max_bytes=3 << 30)
    store.store("avatars", "a", 1, blob(1))
    store.store("masks", "m", 1, blob(1, 0.5))
    line = store.describe()
    assert "1.5 MiB in 2 entries" in line and "avatars 1" in line and "masks 1" in line and "cap 3.0 GiB" in line


def test_an_abandoned_write_is_swept_but_a_fresh_one_is_not(tmp_path):
    import os

    store = ContentCache(tmp_path, max_bytes=None)
    store.store("ns", "k", 1, blob(1, 0.01))
    old, fresh = tmp_path / "ns" / ".tmp-old-1234", tmp_path / "ns" / ".tmp-fresh-5678"
    old.mkdir()
    fresh.mkdir()
    os.utime(old, (1, 1))
    store.sweep()
    assert not old.exists() and fresh.exists()


# Each process stores and loads random keys of one namespace under a cap a third of what they write, so entries
# are evicted under the other process's feet all the time. Entry `kN` always holds the value N (keys are content
# addresses), so any torn, mixed or half-written read shows up as a wrong value, a wrong length or an exception.
# A store whose fresh entry is evicted or replaced by another process before it is handed back must still return
# what it wrote (CI once caught `store` raising there; with the old code, 2 of 12 such processes in 4 runs of 3 hit it).
WORKER = r"""
import random, sys
sys.path.insert(0, sys.argv[1])
import torch
from engines.common.cache import ContentCache
root, seed, rounds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
store = ContentCache(root, max_bytes=3 * (1 << 20))
held, bad, hits, writes = [], [], 0, 0
for step in range(rounds):
    n = rng.randrange(10)
    size = (1 << 18) // 4 * (1 + n % 3)
    if rng.random() < 0.5:
        store.store("shared", f"k{n}", 1, {"x": torch.full((size,), float(n))}, {"n": n, "size": size})
        writes += 1
    else:
        entry = store.load("shared", f"k{n}", 1)
        if entry is not None:
            hits += 1
            x = entry.tensors["x"]
            if entry.meta != {"n": n, "size": size} or x.numel() != size or not bool((x == n).all()):
                bad.append((step, n, entry.meta, x.numel()))
            if rng.random() < 0.3:
                held.append(x)            # keep reading it for a while: it must not vanish meanwhile
    if len(held) > 3:
        x = held.pop(0)
        if not bool((x == x[0]).all()):
            bad.append(("held", float(x[0])))
print("RESULT", len(bad), hits, writes, bad[:3], flush=True)
"""


def test_processes_sharing_a_cache_never_see_half_an_entry(tmp_path):
    root = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(REPO_ROOT), str(root), str(seed), "300"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2, 3)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        line = [ln for ln in out.splitlines() if ln.startswith("RESULT")][-1].split(maxsplit=4)
        results.append((int(line[1]), int(line[2]), int(line[3]), line[4]))
    for bad, hits, writes, sample in results:
        assert bad == 0, f"a process read a wrong or partial entry: {sample}"
        assert hits > 10 and writes > 40, results       # both really read and wrote
    store = ContentCache(root, max_bytes=3 * MIB)
    store.enforce_cap()
    assert store.size_bytes() <= store.max_bytes
    leftovers = [p.name for p in (root / "shared").iterdir() if p.name.startswith(".")]
    assert leftovers == [], f"temporary or retired folders left behind: {leftovers}"


def test_the_cache_script_lists_and_clears_a_namespace(tmp_path):
    store = ContentCache(tmp_path, max_bytes=None)
    store.store("musetalk_avatars", "a", 1, blob(1, 0.01))
    store.store("wardrobe_masks", "m", 1, blob(1, 0.01))
    script = [sys.executable, str(REPO_ROOT / "scripts" / "cache.py"), str(tmp_path)]
    shown = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "2 entries" in shown.stdout, shown.stderr
    cleared = subprocess.run(script + ["--clear", "musetalk_avatars"], capture_output=True, text=True, timeout=120)
    assert cleared.returncode == 0 and "removed 1 entries" in cleared.stdout and "wardrobe_masks 1" in cleared.stdout
    assert keys(store, "musetalk_avatars") == [] and keys(store, "wardrobe_masks") == ["m"]
    wrong = subprocess.run(script + ["--clear", "nope"], capture_output=True, text=True, timeout=120)
    assert wrong.returncode != 0 and "wardrobe_masks" in wrong.stderr


@pytest.mark.parametrize("locks", [True, False], ids=["flock", "no-locks"])
def test_store_returns_what_it_wrote_and_the_entry_loads_as_written(tmp_path, monkeypatch, locks):
    """Both publishing orders: mapped before the rename (where flock exists) and loaded after it (Windows). The
    returned entry and a later load hold the values and the meta as JSON gives them back."""
    if not locks:
        monkeypatch.setattr(cache_mod, "fcntl", None)
    store = ContentCache(tmp_path, max_bytes=None)
    entry = store.store("ns", "k", 1, blob(7, 0.25), {"shape": (2, 3), "name": "x"})
    assert entry.path == store.entry_path("ns", "k") and (entry.path / cache_mod.LOCK_FILE).exists()
    assert bool((entry.tensors["x"] == 7).all()) and entry.meta == {"shape": [2, 3], "name": "x"}
    again = store.load("ns", "k", 1)
    assert bool((again.tensors["x"] == 7).all()) and again.meta == entry.meta
    assert not [p for p in (tmp_path / "ns").iterdir() if p.name.startswith(cache_mod.TMP_PREFIX)]


def test_an_entry_retired_right_after_its_rename_is_still_handed_to_its_writer(tmp_path, monkeypatch):
    """Another process may retire a fresh entry (same key stored again, or a clear) between the writer's rename and
    its return: the writer still gets its values, mapped from the file it wrote (the race CI caught)."""
    store = ContentCache(tmp_path, max_bytes=None)
    real_replace = cache_mod.os.replace

    def replace_then_retire(src, dst):
        real_replace(src, dst)
        if Path(dst).name == "k":                 # the entry's rename, not a retirement's
            assert store._retire(Path(dst))

    monkeypatch.setattr(cache_mod.os, "replace", replace_then_retire)
    entry = store.store("ns", "k", 1, blob(5, 0.25))
    monkeypatch.undo()
    assert bool((entry.tensors["x"] == 5).all())
    assert store.load("ns", "k", 1) is None       # gone from view, as the other process asked
    del entry
    gc.collect()
    store.sweep()                                 # and from the disk once its writer lets go
    assert not list((tmp_path / "ns").iterdir())


def test_a_read_only_cache_gives_its_hits_and_retires_nothing(tmp_path, monkeypatch):
    """A cache on a drive mounted read-only (several servers sharing one models folder): every write under it fails
    with EROFS, as the kernel's read-only mount does (the suite runs as root, which no permission bit stops, so the
    mount's rule is stood in for at the os calls the store uses). A hit must still load, and nothing may be
    retired or evicted as 'corrupt'."""
    import errno
    import os

    cache = ContentCache(tmp_path, max_bytes=None)
    cache.store("ns", "k", 1, {"x": torch.arange(6.0)}, {"a": 1})
    root = str(tmp_path)
    real_open, real_utime, real_replace = os.open, os.utime, os.replace
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def under(path):
        return str(path).startswith(root)

    def ro_open(path, flags, *args, **kwargs):
        if under(path) and flags & write_flags:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    def ro_utime(path, *args, **kwargs):
        if under(path):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_utime(path, *args, **kwargs)

    def ro_replace(src, dst, *args, **kwargs):
        if under(src) or under(dst):
            raise OSError(errno.EROFS, "Read-only file system", str(src))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "open", ro_open)
    monkeypatch.setattr(os, "utime", ro_utime)
    monkeypatch.setattr(os, "replace", ro_replace)
    entry = cache.load("ns", "k", 1)
    assert entry is not None and torch.equal(entry.tensors["x"], torch.arange(6.0)) and entry.meta == {"a": 1}
    del entry
    gc.collect()
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "ns").iterdir()) == ["k"]      # nothing retired
    assert cache.load("ns", "k", 1) is not None

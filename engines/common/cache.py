"""The content-hash cache: one keyed store for everything computed once and reused.

Mask sequences, voice prompts, MuseTalk avatars, Ditto packets and audio features all live here. An entry is a
folder ``<root>/<namespace>/<key>/`` holding ``tensors.safetensors`` and ``meta.json``. The key is a hash of the
input content, the parameters and a format version, so a change of any of them is a miss, never a stale hit.

Guarantees:
- writes go to a temporary folder that is renamed into place only when complete, so a crash or an interrupt never
  leaves an entry that looks valid; two processes sharing the folder never see half an entry (see ContentCache);
- reads are memory-mapped (the tensors are views on the file, not copies);
- an entry that is corrupt or was written under another format version is deleted and reported as a miss;
- the folder stays under a size cap (``BROADCAST_CACHE_MAX_GB``, 20 GiB by default) by least-recently-used
  eviction that never evicts an entry being read.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import math
import mmap
import os
import shutil
import struct
import time
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import numpy as np
import torch

try:
    import fcntl
except ImportError:  # Windows: no advisory locks (see ContentCache)
    fcntl = None

log = logging.getLogger("broadcast_avatar")

TENSORS_FILE = "tensors.safetensors"
META_FILE = "meta.json"
LOCK_FILE = "lock"
TMP_PREFIX = ".tmp-"        # being written
TRASH_PREFIX = ".trash-"    # retired, deleted once no reader holds it
ABANDONED_WRITE_SECONDS = 6 * 3600  # a .tmp- folder this old belongs to a writer that died
MAX_GB_ENV = "BROADCAST_CACHE_MAX_GB"
DEFAULT_MAX_GB = 20
GIB = 1 << 30

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
    """A loaded entry: memory-mapped tensors plus the JSON metadata stored with them.

    `path` is None for an entry too large for the cache's cap: its tensors are then the ones given to `store`.
    """

    path: Optional[Path]
    tensors: dict
    meta: dict


def default_max_bytes() -> Optional[int]:
    """The size cap from ``BROADCAST_CACHE_MAX_GB`` (GiB, fractions allowed; ``none`` for no cap), else 20 GiB.

    20 GiB holds a few Ditto packets of a long 1080p loop (the largest entries, about 1-3 GiB each) next to many
    avatars, voice prompts and mask sequences, and fits on any disk that holds the models themselves.
    """
    raw = os.environ.get(MAX_GB_ENV, "").strip().lower()
    if not raw:
        return int(DEFAULT_MAX_GB * GIB)
    if raw in ("none", "unlimited", "off"):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{MAX_GB_ENV}={raw!r}: expected a size in GiB (e.g. 20 or 0.5) or 'none'") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{MAX_GB_ENV}={raw!r}: expected a size in GiB of at least 0, or 'none'")
    return int(value * GIB)


def max_bytes_or_default() -> tuple[Optional[int], Optional[str]]:
    """The cap as a server uses it: ``(default_max_bytes(), None)``, or for a malformed ``BROADCAST_CACHE_MAX_GB``
    the default cap and the problem, to be logged. A typo in an environment variable must not make every
    cached node of a running server fail; the server says once what it uses instead (`scripts/cache.py`, which a
    user runs by hand, refuses the bad value outright)."""
    try:
        return default_max_bytes(), None
    except ValueError as exc:
        return int(DEFAULT_MAX_GB * GIB), f"{exc}; using the default cap of {DEFAULT_MAX_GB} GiB until it is fixed"


class ContentCache:
    """A folder of content-addressed entries, grouped by namespace (one per kind of thing cached), kept under a
    size cap by least-recently-used eviction.

    Several processes may share the folder (two ComfyUI servers on one models folder): an entry appears by one
    rename when complete and disappears by one rename (into a ``.trash-*`` folder, deleted after), so a reader sees
    a whole entry or none. A reader holds a shared lock on the entry's ``lock`` file for as long as any of its
    memory-mapped tensors is alive; eviction takes the lock exclusively without waiting and skips an entry it cannot
    get, so an entry being read is never evicted. "Last used" is the mtime of ``meta.json``, touched on every hit.
    (Without ``fcntl``, i.e. on Windows, the OS itself refuses to delete a mapped file; such a folder is retried at
    the next sweep.)

    Args:
        root: the cache folder (ComfyUI's ``models/broadcast_cache``).
        max_bytes: the cap; by default `default_max_bytes()`; None for no cap.
    """

    def __init__(self, root: os.PathLike | str, max_bytes: Optional[int] | str = "default"):
        self.root = Path(root)
        self.max_bytes = default_max_bytes() if max_bytes == "default" else max_bytes

    def entry_path(self, namespace: str, key: str) -> Path:
        return self.root / namespace / key

    # -- reading ------------------------------------------------------------------------------------------------

    def load(self, namespace: str, key: str, version: int) -> Optional[CacheEntry]:
        """Return the entry, or `None` on a miss. A corrupt or other-version entry is removed first."""
        path = self.entry_path(namespace, key)
        if not path.is_dir():
            return None
        lock = _open_lock(path)
        if lock is None:                      # retired between the check and the open
            return None
        try:
            _lock_shared(lock)
            if not _same_file(lock, path / LOCK_FILE):  # evicted or replaced while we waited for the lock
                os.close(lock)
                return None
            with open(path / META_FILE, encoding="utf-8") as f:
                stored = json.load(f)
            if stored.get("format_version") != version or stored.get("namespace") != namespace:
                raise ValueError("format version changed")
            tensors = load_safetensors_mmap(path / TENSORS_FILE, hold_lock=lock)
            lock = None                       # now owned by the mapping (released when its tensors are freed)
            try:
                os.utime(path / META_FILE)    # least-recently-used order
            except OSError:                   # a read-only cache (a shared drive): a hit all the same
                pass
        except Exception:
            if lock is not None:
                os.close(lock)
            self._retire(path)
            self.sweep()
            return None
        return CacheEntry(path=path, tensors=tensors, meta=stored.get("meta", {}))

    # -- writing ------------------------------------------------------------------------------------------------

    def store(self, namespace: str, key: str, version: int, tensors: Mapping[str, torch.Tensor],
              meta: Optional[Mapping[str, Any]] = None,
              write_files: Optional[Callable[[Path], None]] = None) -> CacheEntry:
        """Write an entry atomically and return it loaded back (memory-mapped), then evict down to the cap.

        An entry larger than the whole cap is not written: it is returned as given (`path` None), with one log
        line saying how to raise the cap. `write_files(folder)` may add other files (an ONNX graph and its
        external data) to the entry before it is renamed into place, so they appear with the tensors or not at all.
        """
        from safetensors.torch import save_file

        cpu = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        size = sum(t.numel() * t.element_size() for t in cpu.values())
        if self.max_bytes is not None and size > self.max_bytes:
            log.warning("Broadcast cache: a %s entry of %s is larger than the cache's cap of %s and is not kept "
                        "(set %s to raise the cap)", namespace, format_bytes(size), format_bytes(self.max_bytes),
                        MAX_GB_ENV)
            return CacheEntry(path=None, tensors=cpu, meta=dict(meta or {}))
        final = self.entry_path(namespace, key)
        tmp = final.parent / f"{TMP_PREFIX}{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True, exist_ok=False)
        try:
            save_file(cpu, str(tmp / TENSORS_FILE))
            if write_files is not None:
                write_files(tmp)
            stored = json.dumps({"format_version": version, "namespace": namespace, "meta": dict(meta or {})})
            with open(tmp / META_FILE, "w", encoding="utf-8") as f:
                f.write(stored)
            (tmp / LOCK_FILE).touch()
            # Where there are locks, map the entry and take its reader's lock before it becomes visible: from the
            # rename on, another process may evict or replace it, and the caller must still get what was written.
            # (Windows keeps the old order: it may refuse to rename a folder with a mapped file in it.)
            written = self._map_before_publishing(tmp) if fcntl is not None else None
            if final.exists():                # an older entry under this key: retire it first (readers keep theirs)
                self._retire(final)
            try:
                os.replace(tmp, final)
            except OSError:                   # another process stored the same key meanwhile: keep theirs (our
                shutil.rmtree(tmp, ignore_errors=True)  # mapping stays valid: same content, unlinked file)
            else:
                try:
                    os.utime(final / META_FILE)  # least-recently-used order
                except OSError:
                    pass                      # already evicted by another process: ours is still mapped
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if written is not None:
            entry = CacheEntry(path=final, tensors=written, meta=json.loads(stored)["meta"])  # as load gives it
        else:
            entry = self.load(namespace, key, version)
            if entry is None:
                raise RuntimeError(f"cache entry {final} could not be read back after writing")
        self.enforce_cap(keep=final)
        return entry

    @staticmethod
    def _map_before_publishing(tmp: Path) -> dict:
        lock = _open_lock(tmp)
        _lock_shared(lock)
        try:
            return load_safetensors_mmap(tmp / TENSORS_FILE, hold_lock=lock)
        except BaseException:
            os.close(lock)
            raise

    # -- size, eviction, clearing -------------------------------------------------------------------------------

    def entries(self, namespace: Optional[str] = None) -> list[tuple[float, int, Path]]:
        """``(last used, bytes, path)`` of every entry (of one namespace, or all), oldest use first."""
        out = []
        spaces = [self.root / namespace] if namespace else _subdirs(self.root)
        for space in spaces:
            for path in _subdirs(space):
                try:
                    out.append((os.stat(path / META_FILE).st_mtime, _folder_bytes(path), path))
                except OSError:
                    continue                  # retired meanwhile, or a broken entry (load removes those)
        return sorted(out, key=lambda e: e[0])

    def size_bytes(self) -> int:
        """Bytes on disk: entries plus folders being written or waiting to be deleted."""
        total = 0
        for space in _subdirs(self.root, hidden=True):
            for path in _subdirs(space, hidden=True):
                total += _folder_bytes(path)
        return total

    def enforce_cap(self, keep: Optional[Path] = None) -> int:
        """Evict least-recently-used entries until the cache is under its cap; returns the bytes freed.
        Entries being read (locked) and `keep` are skipped."""
        self.sweep()
        if self.max_bytes is None:
            return 0
        total, freed = self.size_bytes(), 0
        for _used, size, path in self.entries():
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            if self._evict(path):
                total -= size
                freed += size
        return freed

    def clear(self, namespace: Optional[str] = None) -> int:
        """Remove every entry of `namespace` (all namespaces if None); returns how many were removed. An entry being
        read disappears from view now and from the disk when its reader lets go."""
        count = 0
        for _used, _size, path in self.entries(namespace):
            count += self._retire(path)
        self.sweep()
        return count

    def describe(self) -> str:
        """One line for the log: where, how big, how many entries per namespace, the cap."""
        per_space: dict = {}
        for _used, _size, path in self.entries():
            per_space[path.parent.name] = per_space.get(path.parent.name, 0) + 1
        spaces = ", ".join(f"{name} {n}" for name, n in sorted(per_space.items())) or "empty"
        cap = format_bytes(self.max_bytes) if self.max_bytes is not None else "none"
        return (f"{self.root}: {format_bytes(self.size_bytes())} in {sum(per_space.values())} entries ({spaces}); "
                f"cap {cap} ({MAX_GB_ENV})")

    def sweep(self) -> None:
        """Delete retired entries nobody reads any more, and writes abandoned by a crashed process."""
        now = time.time()
        for space in _subdirs(self.root):
            for path in _subdirs(space, hidden=True):
                if path.name.startswith(TRASH_PREFIX):
                    lock = _open_lock(path, create=False)
                    if lock is None or _try_exclusive(lock):
                        shutil.rmtree(path, ignore_errors=True)
                    if lock is not None:
                        os.close(lock)
                elif path.name.startswith(TMP_PREFIX):
                    try:
                        if now - os.stat(path).st_mtime > ABANDONED_WRITE_SECONDS:
                            shutil.rmtree(path, ignore_errors=True)
                    except OSError:
                        pass

    def _evict(self, path: Path) -> bool:
        lock = _open_lock(path, create=False)
        if lock is None:
            return False
        try:
            if not _try_exclusive(lock):
                return False                  # being read
            if not self._retire(path):
                return False
        finally:
            os.close(lock)
        self.sweep()
        return True

    def _retire(self, path: Path) -> bool:
        """Move an entry out of view in one rename; `sweep` deletes it once no reader holds it."""
        try:
            os.replace(path, path.parent / f"{TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")
            return True
        except OSError:
            return False                      # already gone (another process), or the OS refuses (Windows, mapped)


def format_bytes(n: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _subdirs(folder: Path, hidden: bool = False) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir() and (hidden or not p.name.startswith("."))]
    except OSError:
        return []


def _folder_bytes(folder: Path) -> int:
    total = 0
    try:
        for p in folder.iterdir():
            try:
                total += p.stat().st_size
            except OSError:
                pass
    except OSError:
        pass
    return total


def _open_lock(entry: Path, create: bool = True) -> Optional[int]:
    """A file descriptor on the entry's lock file, or None if the entry is gone. In a read-only cache (a shared
    drive mounted read-only) the file is opened for reading: a shared flock needs no write access."""
    try:
        return os.open(entry / LOCK_FILE, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            return None
    try:
        return os.open(entry / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None


def _lock_shared(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_SH)        # evictors hold it exclusively only for one rename


def _try_exclusive(fd: int) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class _HeldMap(mmap.mmap):
    """A read-only mapping that keeps its entry's shared lock until the last tensor viewing it is freed."""


def load_safetensors_mmap(path: os.PathLike | str, hold_lock: Optional[int] = None) -> dict:
    """Open a .safetensors file as memory-mapped, read-only CPU tensors (no copy of the data).

    `hold_lock`: a file descriptor closed when the mapping is freed (with the last tensor), or at once when no
    tensor needs the mapping; on an error it is left to the caller.
    """
    path = Path(path)
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        size = os.fstat(f.fileno()).st_size
        mm = _HeldMap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        if 8 + header_len > size:
            raise ValueError(f"{path}: truncated header")
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
    if hold_lock is not None:
        if mm is not None:
            weakref.finalize(mm, os.close, hold_lock)  # the tensors keep `mm` alive, and so the lock
        else:
            os.close(hold_lock)
    return out

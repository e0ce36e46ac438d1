"""The batch runner's ledger: an append-only JSONL file outside ComfyUI, one record per event, keyed by job.

ComfyUI keeps its queue and history in memory only, so what a batch has done must live elsewhere to survive a dead
server or a stopped runner. Each record is one JSON line written with a single `write` on an `O_APPEND` descriptor
under an exclusive `flock` and then fsync'ed: a reader never sees half of someone else's line, and a line torn by a
crash (power loss, SIGKILL during the write) is the last one and is skipped on reading. The last record of a job
says where it stands; earlier ones are its history (every attempt stays on file).

Record kinds (field ``state``), all with ``key`` (the job), ``t`` (Unix time) and, for attempts, ``attempt``:
- ``job``: what the job is (name, workflow, overrides, line of the batch file), written once per run;
- ``submitted``: an attempt was sent: ``server``, ``prompt_id``, ``prefix`` (the unique filename prefix);
  written *before* POST /prompt, so a runner that dies in between still finds the prompt on resume;
- ``done``: ``files`` (``path``, ``sha256``, ``bytes``), ``qc`` (every ``broadcast_qc`` verdict found), ``seconds``;
- ``retry``: the attempt failed and the job goes back to the queue (``error``, ``kind``);
- ``fault``: a connection to the attempt's server failed (``error``) and the server, asked, had its prompt
  ``found`` "queued", "finished" or "unknown" (then a ``retry`` follows); not an outcome: the attempt goes on;
- ``failed`` / ``invalid``: final (attempts used up / the job cannot run as written), with ``error``;
- ``server``: a server (re)joined: ``server``, ``url``, ``pid`` (its process, for the tests' PID checks).

A job counts as done only while every recorded output file exists with its recorded sha256 (`verify_done`).
Only the standard library is used.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Iterator, Optional

FINAL_STATES = ("done", "failed", "invalid")
ATTEMPT_STATES = ("submitted", "done", "retry", "failed", "invalid")


class LedgerBusy(RuntimeError):
    """Another runner holds this ledger."""


def sha256_file(path: os.PathLike | str, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical(value) -> str:
    """JSON with sorted keys and no spaces: the same job always hashes the same."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Ledger:
    """One JSONL ledger file. `lock()` makes this runner its only writer for the run (a second runner refuses)."""

    def __init__(self, path: os.PathLike | str):
        self.path = Path(path)
        self._lock_fd: Optional[int] = None

    # -- one runner per ledger ----------------------------------------------------------------------------------
    def lock(self) -> "Ledger":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.path) + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LedgerBusy(f"another batch runner is using {self.path} (its lock file {self.path}.lock is held); "
                             "wait for it to finish or stop it first") from None
        self._lock_fd = fd
        return self

    def unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock

    # -- writing ------------------------------------------------------------------------------------------------
    def append(self, record: dict) -> dict:
        """Write one record atomically (one write call, flock'ed, fsync'ed); returns it with its time stamp."""
        return self.append_many([record])[0]

    def append_many(self, records: list[dict]) -> list[dict]:
        """Write several records with one write call and one fsync (the `job` records of a run).

        Each stays a line of its own; a crash during the write can leave only whole lines and at most one torn last
        line, which is skipped. Use it only for records that nothing waits on one by one: an attempt's `submitted`
        and `done` records are each written, and fsync'ed, on their own, at the moment they must be on disk.
        """
        stamp = round(time.time(), 3)
        records = [{"t": stamp, **record} for record in records]
        if not records:
            return records
        data = b"".join((canonical(record) + "\n").encode() for record in records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and _last_byte(self.path, size) != b"\n":
                data = b"\n" + data  # a line torn by a crash stays alone on its line (and is skipped)
            view = memoryview(data)
            while view:  # one call for a regular file; the loop only guards against a short write
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)  # also releases the flock
        return records

    # -- reading ------------------------------------------------------------------------------------------------
    def records(self) -> Iterator[dict]:
        """Every complete record in file order; a torn or foreign line is skipped."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # torn last line
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict) and "state" in record:
                    yield record

    def jobs(self) -> dict[str, "JobHistory"]:
        """``{key: JobHistory}`` over the whole file."""
        out: dict[str, JobHistory] = {}
        for record in self.records():
            if record.get("state") == "server" or "key" not in record:
                continue
            out.setdefault(record["key"], JobHistory(record["key"])).add(record)
        return out

    def servers(self) -> list[dict]:
        return [r for r in self.records() if r.get("state") == "server"]


def _last_byte(path: Path, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1)


class JobHistory:
    """The records of one job, in order, with the questions the runner asks of them."""

    def __init__(self, key: str):
        self.key = key
        self.records: list[dict] = []

    def add(self, record: dict) -> None:
        self.records.append(record)

    @property
    def attempt_records(self) -> list[dict]:
        return [r for r in self.records if r.get("state") in ATTEMPT_STATES]

    @property
    def last(self) -> Optional[dict]:
        attempts = self.attempt_records
        return attempts[-1] if attempts else None

    @property
    def state(self) -> str:
        return self.last["state"] if self.last else "pending"

    @property
    def attempts(self) -> int:
        """How many attempts were started (submitted), over every run."""
        return len({r["attempt"] for r in self.records if r.get("state") == "submitted"})

    def in_flight(self) -> Optional[dict]:
        """The `submitted` record of an attempt that never got an outcome (the runner stopped), else None."""
        last = self.last
        return last if last is not None and last["state"] == "submitted" else None

    def done_record(self) -> Optional[dict]:
        last = self.last
        return last if last is not None and last["state"] == "done" else None


def verify_done(record: dict) -> Optional[str]:
    """None when every output file of a `done` record is there with its sha256; else why the job is not done."""
    files = record.get("files") or []
    if not files:
        return "no output file was recorded"
    for item in files:
        path = Path(item["path"])
        if not path.is_file():
            return f"output {path} is missing"
        if path.stat().st_size != item.get("bytes", path.stat().st_size) or sha256_file(path) != item["sha256"]:
            return f"output {path} does not match its recorded sha256 (changed or corrupt)"
    return None


"""Overlapped stages for renderers: each stage an iterator, run in its own thread behind a bounded queue.

A renderer written as a chain of generators (networks -> decode -> paste-back -> the caller's encoder) runs
sequentially as it is; wrapping a stage in `threaded` lets it work ahead of its consumer by at most `depth`
items, so the clip's wall time approaches the slowest stage's instead of the sum while memory stays flat (never
more than `depth` chunks waiting per stage). PyTorch releases the GIL inside its kernels, and on a GPU the launches
of one stage overlap the CPU work (paste-back, encode) of the next.

Errors raised in a stage come out of the consumer's ``next()``; closing the consumer (an interrupt, an error
downstream) stops the stage before the call returns, so nothing keeps running after a cancel.

The stages run on long-lived worker threads, reused from one clip to the next, not on a new thread per stage per
clip. glibc gives a thread that first allocates an arena of its own (up to 8 per core) and keeps what a thread
freed in that arena for the next thread to get it: new threads every run spread the clips' buffers over ever more
arenas, each holding its own free pages. Measured through a server (tests/comfy/test_memory_flat.py, MuseTalk, 40
runs): with a new thread per stage the process's anonymous memory climbed 640 -> 700 MiB over 20 runs and scattered
+-15 MiB after; run without threads it stayed at 625-627 MiB from the fourth run on.
"""
from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional, TypeVar

import torch

T = TypeVar("T")
_DONE = object()


class _Workers:
    """Daemon threads that run stage bodies one after another and wait, idle, for the next (module docstring: one
    arena per thread, kept). A stage takes an idle worker or starts one, so stages never wait for each other;
    at most `keep` idle workers stay, a worker beyond that ends after its stage."""

    def __init__(self, keep: int = 8):
        self.keep = keep
        self._idle: list = []
        self._lock = threading.Lock()

    def submit(self, body, name: str) -> threading.Event:
        """Run ``body()`` on a worker named ``broadcast-avatar-<name>`` while it runs; the event is set once it has
        returned (the worker is then idle, renamed, or gone)."""
        finished = threading.Event()
        with self._lock:
            tasks = self._idle.pop() if self._idle else None
            if tasks is None:
                tasks = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(tasks,), name="broadcast-avatar-idle",
                                 daemon=True).start()
        tasks.put((body, name, finished))
        return finished

    def _serve(self, tasks: queue.SimpleQueue) -> None:
        me = threading.current_thread()
        while True:
            body, name, finished = tasks.get()
            me.name = f"broadcast-avatar-{name}"
            try:
                body()                      # never raises: `threaded` hands its errors to the consumer
            finally:
                body = None                 # the stage's closure (its source, queue) is not kept while idle
                me.name = "broadcast-avatar-idle"
                with self._lock:
                    stay = len(self._idle) < self.keep
                    if stay:
                        self._idle.append(tasks)
                finished.set()
            if not stay:
                return

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)


_WORKERS = _Workers()


def threaded(source: Iterable[T], depth: int = 2, name: str = "stage") -> Iterator[T]:
    """Iterate `source` on a worker thread (long-lived: module docstring), at most `depth` items ahead of the
    consumer."""
    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()   # thread-local: carried over

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                for item in source:
                    if not put((None, item)):
                        return
            put((None, _DONE))
        except BaseException as exc:       # handed to the consumer, raised there
            put((exc, None))
        finally:
            close = getattr(source, "close", None)
            if close is not None and stop.is_set():
                close()

    finished = _WORKERS.submit(work, name)
    try:
        while True:
            err, item = q.get()
            if err is not None:
                raise err
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        while not finished.is_set():
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            finished.wait(timeout=0.05)


class StageTimes(dict):
    """Stage -> wall seconds (what `timing` always records), plus ``cpu``: stage -> CPU seconds of the thread that ran
    it. With one intra-op thread per stage that is the stage's whole CPU time, so a stage whose wall time grows while
    its CPU time does not was waiting for a core (or the GIL), not working: the benchmarks' contention figure."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cpu: dict = {}


@contextmanager
def timing(times: Optional[dict], stage: str):
    """Add the block's wall time to ``times[stage]`` (for the benchmarks' stage figures); no-op without a dict. A
    `StageTimes` also gets the calling thread's CPU time in ``times.cpu[stage]``."""
    if times is None:
        yield
        return
    t, c = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        times[stage] = times.get(stage, 0.0) + time.perf_counter() - t
        cpu = getattr(times, "cpu", None)
        if cpu is not None:
            cpu[stage] = cpu.get(stage, 0.0) + time.thread_time() - c

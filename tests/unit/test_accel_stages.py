"""Overlapped stages (engines/accel/stages.py): order kept, errors surfaced, bounded look-ahead, clean stop."""
import threading
import time

import pytest
import torch

from engines.accel import stages
from engines.accel.stages import StageTimes, threaded, timing


def test_items_come_out_in_order_and_the_stage_runs_in_another_thread():
    seen = []

    def source():
        for i in range(20):
            seen.append(threading.current_thread().name)
            yield i
    assert list(threaded(source(), depth=2, name="unit")) == list(range(20))
    assert set(seen) == {"broadcast-avatar-unit"}


def test_an_error_in_the_stage_is_raised_in_the_consumer():
    def source():
        yield 1
        raise ValueError("bad frame 2")
    it = threaded(source())
    assert next(it) == 1
    with pytest.raises(ValueError, match="bad frame 2"):
        next(it)


def test_look_ahead_is_bounded_and_closing_stops_the_stage():
    produced = []

    def source():
        for i in range(1000):
            produced.append(i)
            yield torch.zeros(4)
    it = threaded(source(), depth=2)
    next(it)
    time.sleep(0.3)
    assert len(produced) <= 1 + 2 + 1          # the one consumed, `depth` queued, one blocked in put
    it.close()
    assert not [t for t in threading.enumerate() if t.name == "broadcast-avatar-stage"]
    assert len(produced) < 10


def test_stages_reuse_long_lived_workers_run_after_run():
    """A new thread per stage per clip spreads memory over new glibc arenas (engines/accel/stages.py): clip after
    clip, the stages run on the same few threads, and at most `keep` of them wait idle."""
    def ident():
        yield threading.get_ident()
    first = [next(threaded(ident(), name="a"))]
    for _ in range(20):
        first.append(list(threaded(ident(), name="a"))[0])
    assert len(set(first)) == 1                            # one stage at a time: always the same worker

    def nested():                                          # three stages at once, as the MuseTalk chain runs
        yield from threaded(threaded(threaded(ident(), name="x"), name="y"), name="z")
    before = {t.ident for t in threading.enumerate()}
    chains = [list(nested()) for _ in range(10)]
    started = {t.ident for t in threading.enumerate()} - before
    assert len(started) <= 3 and len({c[0] for c in chains}) == 1
    assert stages._WORKERS.idle() <= stages._WORKERS.keep


def test_an_idle_worker_keeps_nothing_of_its_last_stage():
    import gc
    import weakref

    big = torch.zeros(1 << 20)
    ref = weakref.ref(big)
    assert list(threaded([big], name="keep"))[0].numel() == 1 << 20   # a list: the stage's source holds the tensor
    del big
    gc.collect()
    assert ref() is None and stages._WORKERS.idle() >= 1


def test_grad_mode_is_carried_into_the_stage():
    def source():
        yield torch.is_grad_enabled(), torch.is_inference_mode_enabled()
    with torch.inference_mode():
        assert next(threaded(source())) == (False, True)


def test_timing_adds_up_per_stage():
    times = {}
    for _ in range(2):
        with timing(times, "a"):
            time.sleep(0.01)
    assert times["a"] >= 0.02
    with timing(None, "a"):
        pass


def test_stage_times_also_count_the_stage_thread_s_cpu_time():
    """A waiting stage (a sleep, as a stage waiting on a GPU or for a core) adds wall time, not CPU time; work adds
    both. The benchmark's contention figure reads the difference."""
    times = StageTimes()
    with timing(times, "wait"):
        time.sleep(0.05)
    with timing(times, "work"):
        x = torch.randn(256, 256)
        for _ in range(20):
            x = (x @ x).tanh()
    assert set(times) == set(times.cpu) == {"wait", "work"}
    assert times["wait"] >= 0.05 and times.cpu["wait"] < times["wait"] / 2
    assert times.cpu["work"] > 0
    # in a stage thread: the worker's own CPU time, not the consumer's
    def source():
        with timing(times, "threaded"):
            sum(i * i for i in range(200000))
        yield 1
    assert list(threaded(source(), name="cpu")) == [1]
    assert times.cpu["threaded"] > 0

"""engines.common.progress: steps are reported and a cancel raises from inside the loop."""
from __future__ import annotations

import pytest

from engines.common.progress import Progress, ensure


def test_steps_report_done_and_total_capped():
    seen = []
    p = Progress(3, on_update=lambda done, total: seen.append((done, total)))
    for _ in range(4):
        p.step()
    assert seen == [(1, 3), (2, 3), (3, 3), (3, 3)]
    p.reset(2)
    assert seen[-1] == (0, 2) and p.done == 0


def test_cancel_raises_from_step():
    class Cancelled(Exception):
        pass

    calls = []

    def check():
        calls.append(1)
        if len(calls) == 2:
            raise Cancelled

    p = Progress(10, check_cancel=check)
    p.step()
    with pytest.raises(Cancelled):
        p.step()
    assert p.done == 2


def test_ensure_gives_a_silent_progress():
    p = ensure(None)
    p.step(5)
    p.check()
    assert p.done == 5
    q = Progress(1)
    assert ensure(q) is q

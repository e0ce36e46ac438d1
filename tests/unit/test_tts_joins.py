"""Clause joins: cuts at rising zero crossings, equal-power crossfades, 25 ms at ellipsis joins (joins.py)."""
from __future__ import annotations

import numpy as np
import pytest

from engines.omnivoice import joins as J
from engines.omnivoice.text import JOIN_ELLIPSIS, JOIN_PAUSE

SR = 24000


def sine(freq, seconds, phase=0.0, amp=0.5):
    t = np.arange(int(seconds * SR)) / SR
    return amp * np.sin(2 * np.pi * freq * t + phase)


def test_rising_zero_crossing_is_found_near_the_target():
    x = sine(100.0, 0.1)  # rising crossings every 240 samples: 0, 240, 480...
    assert J.rising_zero_crossing(x, 500, 36) == 480
    assert J.rising_zero_crossing(x, 600, 36) == 600  # none within 1.5 ms: keep the target


def test_join_has_no_step_at_the_seam():
    a, b = sine(220.0, 0.3, phase=0.3), sine(220.0, 0.3, phase=2.0)
    naive = np.concatenate([a, b])
    joined = J.join_clauses([a, b], [JOIN_PAUSE], SR)
    slope_limit = 2 * np.pi * 220.0 / SR * 0.5 * 1.05  # the steepest a 0.5-amplitude 220 Hz sine gets
    assert np.abs(np.diff(naive)).max() > 3 * slope_limit  # butt-joining clicks
    assert np.abs(np.diff(joined)).max() <= slope_limit * 1.5


def test_equal_power_crossfade_keeps_uncorrelated_level():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(SR) * 0.1, rng.standard_normal(SR) * 0.1
    joined = J.crossfade_join(a, b, SR, 25.0)
    n = int(0.025 * SR)
    seam = joined[a.size - n + 40: a.size - 40]
    assert np.sqrt(np.mean(seam ** 2)) == pytest.approx(0.1, rel=0.15)


def test_ellipsis_joins_overlap_longer():
    a, b = sine(150.0, 0.3), sine(150.0, 0.3)
    pause = J.join_clauses([a, b], [JOIN_PAUSE], SR)
    ellipsis = J.join_clauses([a, b], [JOIN_ELLIPSIS], SR)
    overlap_pause, overlap_ellipsis = 2 * a.size - pause.size, 2 * a.size - ellipsis.size
    assert abs(overlap_pause - J.DEFAULT_CROSSFADE_MS * SR / 1000) <= 2 * 36 + 1
    assert abs(overlap_ellipsis - 25.0 * SR / 1000) <= 2 * 36 + 1
    with pytest.raises(ValueError, match="joins"):
        J.join_clauses([a, b], [], SR)


def test_breath_joins_leave_at_least_150_ms_of_quiet():
    from engines.omnivoice.text import JOIN_BREATH

    a, b = sine(150.0, 0.3), sine(150.0, 0.3)
    joined = J.join_clauses([a, b], [JOIN_BREATH], SR)
    quiet = np.abs(joined) < J.QUIET_LEVEL
    runs = np.diff(np.concatenate([[0], quiet.astype(np.int8), [0]]))
    longest = (np.flatnonzero(runs == -1) - np.flatnonzero(runs == 1)).max()
    assert longest >= 0.150 * SR - 2
    # Clips that already end and start with enough quiet get nothing added (plain crossfade length).
    padded = np.concatenate([a, np.zeros(int(0.1 * SR))]), np.concatenate([np.zeros(int(0.1 * SR)), b])
    assert J.join_clauses(list(padded), [JOIN_BREATH], SR).size == J.join_clauses(list(padded), [JOIN_PAUSE], SR).size

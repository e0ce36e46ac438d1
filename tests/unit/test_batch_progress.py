"""The batch runner's terminal output (scripts/batch/progress.py): the bar line with its counts and ETA, the per-server
lines, the in-place redraw on a terminal against plain event lines elsewhere, and the summary table at the end.

A clock of the test's own stands in for `time.monotonic`, so elapsed time and ETA are exact; the runner is the real
`BatchRunner` over the in-process servers of test_batch_ledger.py.
"""
from __future__ import annotations

import io
import json
import re
import types

import pytest

from scripts.batch import progress as batch_progress
from scripts.batch.progress import Progress, summary_table
from tests.unit.test_batch_ledger import SAVE, InProcessServer, _runner


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture()
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(batch_progress, "time", types.SimpleNamespace(monotonic=c.monotonic))
    return c


@pytest.fixture()
def workflow(tmp_path):
    path = tmp_path / "save.api.json"
    path.write_text(json.dumps(SAVE))
    return path


def _set_states(runner, states):
    for run, state in zip(runner.runs, states):
        run.state = state


def test_bar_line_counts_and_eta(tmp_path, workflow, clock):
    a, b = InProcessServer("a", tmp_path / "a"), InProcessServer("b", tmp_path / "b")
    runner = _runner(tmp_path, workflow, range(1, 11), [a, b])
    progress = Progress(runner, stream=io.StringIO())
    progress.begin()                       # t0 = 1000
    assert progress.eta() == "?"           # nothing finished by this run yet: no rate to go by
    _set_states(runner, ["done"] * 4 + ["failed", "running", "running"] + ["pending"] * 3)
    progress.done_here = 4
    clock.now = 1040.0                     # 4 jobs in 40 s: 0.1 job/s, 5 left (2 running, 3 pending) -> 50 s
    assert progress.eta() == "0:50"
    # 5 of 10 finished (done + failed): half of the 30-character bar
    assert progress.bar_line() == ("[" + "#" * 15 + "." * 15 + "] 5/10 (2 running) 1 failed  elapsed 0:40  ETA 0:50")
    runner.runs[-1].state = "invalid"
    assert progress.bar_line().startswith("[" + "#" * 18 + "." * 12 + "] 6/10 (2 running) 1 failed 1 invalid  ")
    clock.now = 1000.0 + 3725          # over an hour: h:mm:ss
    progress.done_here = 1
    assert progress.bar_line().endswith("elapsed 1:02:05  ETA 4:08:20")   # 4 left at 1 job per 3725 s
    _set_states(runner, ["done"] * 10)
    assert progress.eta() == "0:00" and progress.bar_line().startswith("[" + "#" * 30 + "] 10/10 (0 running)")


def test_server_lines_show_status_done_and_the_running_job(tmp_path, workflow, clock):
    a, b = InProcessServer("gpu0", tmp_path / "a"), InProcessServer("gpu1", tmp_path / "b")
    runner = _runner(tmp_path, workflow, [1, 2], [a, b])
    progress = Progress(runner, stream=io.StringIO())
    first, second = runner.slots
    first.status, first.done, first.job, first.job_started = "running", 3, runner.runs[1], 988.0
    second.status, second.done = "restarting (1/3)", 0
    lines = progress.server_lines()
    assert lines == [f"  {'gpu0':<24} {'running':<20} done 3    j2    12 s",
                     f"  {'gpu1':<24} {'restarting (1/3)':<20} done 0    "]


def test_on_a_terminal_the_bar_and_server_lines_are_redrawn_under_the_events(tmp_path, workflow, clock):
    runner = _runner(tmp_path, workflow, [1, 2], [InProcessServer("a", tmp_path / "a")])
    out = io.StringIO()
    progress = Progress(runner, stream=out)
    progress.live = True
    progress.begin()
    progress.tick()                    # less than a second since the last draw: nothing
    drawn = out.getvalue()
    assert drawn.count("\x1b[") == 0 and drawn.endswith(progress.bar_line() + "\n" + progress.server_lines()[0] + "\n")
    out.truncate(0), out.seek(0)
    progress.tick()
    assert out.getvalue() == ""
    clock.now += 1.5
    progress.tick()                    # erase the 2 lines drawn (cursor up 2, clear to the end), draw them again
    assert out.getvalue() == "\x1b[2F\x1b[J" + progress.bar_line() + "\n" + progress.server_lines()[0] + "\n"
    out.truncate(0), out.seek(0)
    runner.runs[0].state = "done"
    progress.event("j1 done on a")     # the event scrolls above: erase, event line, redraw
    assert out.getvalue() == ("\x1b[2F\x1b[J[batch 1/2 eta ?] j1 done on a\n" + progress.bar_line() + "\n"
                              + progress.server_lines()[0] + "\n")


def test_elsewhere_only_event_lines_with_the_count_and_eta(tmp_path, workflow, clock):
    runner = _runner(tmp_path, workflow, [1, 2, 3], [InProcessServer("a", tmp_path / "a")])
    out = io.StringIO()
    progress = Progress(runner, stream=out)
    progress.begin()
    _set_states(runner, ["done", "running", "pending"])
    progress.done_here = 1
    clock.now += 30
    progress.event("j1 done")
    progress.tick()
    progress.end()
    assert out.getvalue().splitlines() == ["[batch 0/3 eta ?] 3 jobs on 1 server(s): 3 pending; 0 already done "
                                           "(skipped)", "[batch 1/3 eta 1:00] j1 done"]


def test_summary_table_after_a_real_run(tmp_path, workflow):
    script = {2: ["error", "error"], 3: ["qc_fail"]}
    runner = _runner(tmp_path, workflow, [1, 2, 3], [InProcessServer("a", tmp_path / "a", script)])
    runner.progress.stream = io.StringIO()
    runner.run()
    lines = summary_table(runner).splitlines()
    header = lines[0]
    assert re.split(r"\s{2,}", header) == ["job", "key", "state", "how", "tries", "server", "secs", "qc",
                                          "output / error"]
    starts = [header.index(col) for col in ("key", "state", "how", "tries", "server", "secs", "qc", "output")]
    rows = {}
    for line in lines[1:4]:   # every cell starts under its column's heading
        assert all(line[s - 2:s] == "  " and line[s] != " " for s in starts), line
        rows[line.split()[0]] = line
    by_name = {r.job.name: r for r in runner.runs}
    for name, (state, how, tries, qc) in {"j1": ("done", "ran", "1", "-"), "j2": ("failed", "-", "2", "-"),
                                          "j3": ("done", "ran", "1", "fail")}.items():
        cells = rows[name].split()
        assert cells[1:5] == [by_name[name].job.key, state, how, tries] and cells[5] == "a" and cells[7] == qc
    assert rows["j1"].endswith(by_name["j1"].files[-1]["path"]) and by_name["j1"].files[-1]["path"].endswith(".bin")
    assert rows["j2"].split()[6] == "-" and rows["j2"].endswith("node 1 (TestSave): RuntimeError: boom")
    assert lines[4] == "3 jobs: 2 done, 1 failed (ran 2, adopted 0, skipped 0); QC failed on 1"
    assert len(lines) == 5

"""The batch runner's terminal output: one bar for the batch with its ETA, one line per server, event lines, and
the summary table at the end.

On a terminal the bar and the server lines are redrawn in place (at most once a second) with the events scrolling
above them; otherwise (a log file, CI) only the event lines are printed, each with the batch count and ETA.
Everything goes to stderr except the summary table (stdout), so `> summary.txt` keeps just the table.
"""
from __future__ import annotations

import sys
import threading
import time

BAR_WIDTH = 30


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    def __init__(self, runner, stream=None):
        self.runner = runner
        self.stream = stream or sys.stderr
        self.live = False
        self.lock = threading.Lock()
        self._drawn = 0
        self._last_draw = 0.0
        self.t0 = time.monotonic()
        self.done_here = 0  # jobs finished by this run (skipped ones excluded), for the ETA

    # -- numbers ------------------------------------------------------------------------------------------------
    def counts(self) -> dict:
        counts: dict = {}
        for run in self.runner.runs:
            counts[run.state] = counts.get(run.state, 0) + 1
        return counts

    def eta(self) -> str:
        counts = self.counts()
        left = sum(n for state, n in counts.items() if state in ("pending", "running"))
        if not left:
            return "0:00"
        if not self.done_here:
            return "?"
        rate = self.done_here / (time.monotonic() - self.t0)
        return _clock(left / rate)

    def bar_line(self) -> str:
        runs = self.runner.runs
        counts = self.counts()
        finished = counts.get("done", 0) + counts.get("failed", 0) + counts.get("invalid", 0)
        filled = int(BAR_WIDTH * finished / max(len(runs), 1))
        extra = "".join(f" {counts[s]} {s}" for s in ("failed", "invalid") if counts.get(s))
        return (f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {finished}/{len(runs)} "
                f"({counts.get('running', 0)} running){extra}  elapsed {_clock(time.monotonic() - self.t0)}  "
                f"ETA {self.eta()}")

    def server_lines(self) -> list[str]:
        lines = []
        for slot in self.runner.slots:
            job = slot.job
            doing = f"{job.job.name} {time.monotonic() - slot.job_started:5.0f} s" if job is not None else ""
            lines.append(f"  {slot.name:<24} {slot.status:<20} done {slot.done:<4} {doing}")
        return lines

    # -- output -------------------------------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _erase(self) -> str:
        if not self._drawn:
            return ""
        drawn, self._drawn = self._drawn, 0
        return f"\x1b[{drawn}F\x1b[J"

    def event(self, message: str) -> None:
        with self.lock:
            prefix = self._erase() if self.live else ""
            finished = sum(1 for r in self.runner.runs if r.state in ("done", "failed", "invalid"))
            self._write(f"{prefix}[batch {finished}/{len(self.runner.runs)} eta {self.eta()}] {message}\n")
            if self.live:
                self._draw()

    def _draw(self) -> None:
        lines = [self.bar_line(), *self.server_lines()]
        self._write("\n".join(lines) + "\n")
        self._drawn = len(lines)
        self._last_draw = time.monotonic()

    def tick(self) -> None:
        if self.live and time.monotonic() - self._last_draw >= 1:
            with self.lock:
                self._write(self._erase())
                self._draw()

    def begin(self) -> None:
        self.t0 = time.monotonic()
        counts = self.counts()
        self.event(f"{len(self.runner.runs)} jobs on {len(self.runner.slots)} server(s): "
                   + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                   + (f"; {sum(1 for r in self.runner.runs if r.how == 'skipped')} already done (skipped)"))

    def done(self, run) -> None:
        self.done_here += 1
        qc = "".join(f" QC {v['verdict']}" + (f" ({', '.join(v['failed'])})" if v["failed"] else "")
                     for v in run.qc)
        self.event(f"{run.job.name} done on {run.server} in {run.seconds:.1f} s{qc}")

    def failed(self, run) -> None:
        self.event(f"{run.job.name} FAILED after {run.tries} attempt(s): {run.error}")

    def end(self) -> None:
        with self.lock:
            if self.live:
                self._write(self._erase())
                self._draw()

    def summary(self) -> dict:
        return {
            "elapsed_s": round(time.monotonic() - self.t0, 3),
            "counts": self.counts(),
            "jobs": [{"name": r.job.name, "key": r.job.key, "state": r.state, "how": r.how, "tries": r.tries,
                      "server": r.server, "seconds": r.seconds, "qc": [v["verdict"] for v in r.qc],
                      "files": [f["path"] for f in r.files], "error": r.error} for r in self.runner.runs],
            "servers": [{"name": s.name, "url": s.url, "pid": s.pid, "done": s.done, "restarts": s.restarts,
                         "status": s.status} for s in self.runner.slots],
        }


def summary_table(runner) -> str:
    """A plain-text table of every job, then the totals."""
    rows = [("job", "key", "state", "how", "tries", "server", "secs", "qc", "output / error")]
    for r in runner.runs:
        qc = ",".join(v["verdict"] for v in r.qc) or "-"
        last = r.files[-1]["path"] if r.files else (r.error.splitlines()[0][:80] if r.error else "")
        rows.append((r.job.name, r.job.key, r.state, r.how or "-", str(r.tries), r.server or "-",
                     f"{r.seconds:.1f}" if r.seconds else "-", qc, last))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths)) + "  " + row[-1] for row in rows]
    counts = runner.progress.counts()
    how = {h: sum(1 for r in runner.runs if r.how == h) for h in ("ran", "adopted", "skipped")}
    qc_fail = sum(1 for r in runner.runs for v in r.qc if v["verdict"] == "fail")
    lines.append(f"{len(runner.runs)} jobs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                 + f" (ran {how['ran']}, adopted {how['adopted']}, skipped {how['skipped']})"
                 + (f"; QC failed on {qc_fail}" if qc_fail else ""))
    return "\n".join(lines)

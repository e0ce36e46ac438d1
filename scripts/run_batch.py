"""Run a batch of jobs (one workflow + overrides per line) over N ComfyUI servers: nothing lost, nothing run twice.

    $BA_PYTHON scripts/run_batch.py evening.jsonl --servers 2 --models-dir ~/ComfyUI/models --out-dir renders/
    $BA_PYTHON scripts/run_batch.py evening.csv --url http://127.0.0.1:8188 --url http://127.0.0.1:8189
    $BA_PYTHON scripts/run_batch.py evening.jsonl --ray --servers 4 --gpu      # one Ray actor per server (and GPU)

Servers: `--servers N` starts N ComfyUIs itself (each in its own base folder under --work-dir, all sharing
--models-dir; with --gpu, server i sees only GPU i), `--url` (repeatable) uses running ones, and `--ray` puts each
server in a Ray actor (`pip install -r scripts/env/ray.txt`; `--ray-address` joins an existing cluster, else a local
one on 127.0.0.1 is started and stopped). The batch file format is described in scripts/batch/jobs.py.

Before the first job: every server is started or reached, the `--input` files are uploaded to each, every job is
converted and checked against each server's /object_info; a model missing on any server refuses the whole batch
(exit 3) rather than failing every job, and a job that cannot run as written is reported as invalid.

The ledger (`--ledger`, default <out-dir>/ledger.jsonl; scripts/batch/ledger.py) records every attempt. A rerun with
the same ledger skips finished jobs (whose copied outputs still match their sha256), adopts prompts still queued or
finished on the servers reached by URL, and runs the rest. Each attempt has its own prompt id and filename prefix, so
ComfyUI's cache can never answer it with no file. When a connection to a server fails mid-job, the runner asks that
server where the job's prompt stands and goes on there if it is queued, running or finished; a job whose prompt is
not there, or whose server cannot be asked (then its prompt is withdrawn, or the server stopped), goes to another
server while that one is restarted (or, by URL, waited for) and rejoins: no job runs twice. An execution error is
retried once elsewhere; attempts are bounded.
Every `broadcast_qc` verdict in a job's outputs is recorded.

Outputs are copied to <out-dir>/<job name>/. Ctrl-C or SIGTERM stops dispatching and exits at once; prompts still
running on servers reached by URL are left there for the next run to adopt (servers this runner started are
stopped with it). Exit codes: 0 every job finished (and no QC failed); 1 some job failed or was invalid; 2 bad
batch file or arguments; 3 missing models on a server; 4 a server could not be started or reached; 5 every job
finished but a Broadcast QC verdict is "fail"; 130 stopped.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.batch.jobs import (BatchError, Job, output_items, qc_verdicts, read_batch,  # noqa: E402
                                unique_prefixes)
from scripts.batch.ledger import JobHistory, Ledger, LedgerBusy, verify_done  # noqa: E402
from scripts.batch.progress import Progress, summary_table  # noqa: E402
from scripts.batch.servers import (LaunchedServer, OutputMissing, ServerDown, Stopped, UrlServer,  # noqa: E402
                                   fetch)
from scripts.comfyui.client import PromptFailed  # noqa: E402
from scripts.comfyui.server import stop_on_signals  # noqa: E402
from scripts.run_workflow import prepare_prompt, user_cache  # noqa: E402
from scripts.workflow.api import WorkflowError, check_prompt, without_pack_models  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MODELS, EXIT_SERVER, EXIT_QC, EXIT_STOPPED = 0, 1, 2, 3, 4, 5, 130
# An execution error is usually deterministic (a bad input, a node bug): one more try on another server, no more.
MAX_EXECUTION_ERRORS = 2
# Connection failures one attempt may meet on a server that answers again: past that the server counts as down
# (its prompt is withdrawn or the server stopped, and the job goes elsewhere).
MAX_FAULTS = 5


class NotThere(RuntimeError):
    """A connection failed mid-attempt and the server, asked, does not have the prompt: it never arrived (or the server
    restarted since), so running the job elsewhere cannot run it twice."""


class Refused(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class JobRun:
    """One job in this run: its ledger history and what happened to it here."""

    def __init__(self, job: Job, history: JobHistory):
        self.job, self.history = job, history
        self.prompt: Optional[dict] = None
        self.state = "pending"          # pending | running | done | failed | invalid
        self.how = ""                   # ran | skipped | adopted
        self.tries = 0                  # attempts started in this run
        self.execution_errors = 0
        self.server = ""
        self.seconds = 0.0
        self.files: list[dict] = []
        self.qc: list[dict] = []
        self.error = ""

    def next_attempt(self) -> int:
        numbers = [r["attempt"] for r in self.history.records if "attempt" in r]
        return max(numbers, default=0) + 1


class Attempt:
    """One attempt of a job that is on a server: posted by this run, or adopted from the ledger."""

    def __init__(self, run: JobRun, number: int, prompt_id: str, started: float):
        self.run, self.number, self.prompt_id, self.started = run, number, prompt_id, started
        self.faults = 0  # connections that failed during this attempt (`BatchRunner._settle`)


class WorkQueue:
    """Jobs waiting for a server. A job requeued after a failure avoids the server it failed on while another is up."""

    def __init__(self):
        self.cond = threading.Condition()
        self.pending: deque = deque()
        self.in_flight = 0
        self.stopping = False

    def put(self, run: JobRun, avoid: frozenset = frozenset(), front: bool = False) -> None:
        """Queue a job; a requeued one goes to the front (it has waited already)."""
        with self.cond:
            if front:
                self.pending.appendleft((run, avoid))
            else:
                self.pending.append((run, avoid))
            self.cond.notify_all()

    def take(self, server: str, others_up) -> Optional[JobRun]:
        """The next job this server may run, waiting for one while others are in flight (they may be requeued);
        None when the batch is over."""
        with self.cond:
            while not self.stopping:
                run = self._first(server, others_up)
                if run is not None:
                    return run
                if not self.pending and self.in_flight == 0:
                    return None
                self.cond.wait(0.5)
            return None

    def take_now(self, server: str, others_up) -> Optional[JobRun]:
        """The next job this server may run if one is waiting now, else None (never blocks)."""
        with self.cond:
            return None if self.stopping else self._first(server, others_up)

    def _first(self, server: str, others_up) -> Optional[JobRun]:
        for i, (run, avoid) in enumerate(self.pending):
            if server not in avoid or not others_up():
                del self.pending[i]
                self.in_flight += 1
                return run
        return None

    def task_done(self) -> None:
        with self.cond:
            self.in_flight -= 1
            self.cond.notify_all()

    def finished(self) -> bool:
        with self.cond:
            return self.stopping or (not self.pending and self.in_flight == 0)

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def drain(self) -> list[JobRun]:
        with self.cond:
            runs = [run for run, _ in self.pending]
            self.pending.clear()
            return runs


class Slot:
    """The dispatcher's view of one server."""

    def __init__(self, server):
        self.server = server
        self.name = server.name
        self.url = ""
        self.pid: Optional[int] = None
        self.up = False
        self.gone = False
        self.restarts = 0
        self.done = 0
        self.status = "starting"
        self.job: Optional[JobRun] = None
        self.job_started = 0.0
        self.adopt: list[tuple[JobRun, dict]] = []
        self.orphans: list[str] = []  # prompts that could not be withdrawn: withdrawn when the server answers again


class BatchRunner:
    def __init__(self, jobs: list[Job], servers: list, ledger: Ledger, out_dir: Path, *, inputs=(),
                 max_attempts: int = 3, max_restarts: int = 3, job_timeout: float = 3600,
                 progress: Optional[Progress] = None):
        self.ledger = ledger
        self.out_dir = Path(out_dir)
        self.inputs = [Path(p) for p in inputs]
        self.max_attempts, self.max_restarts, self.job_timeout = max_attempts, max_restarts, job_timeout
        histories = ledger.jobs()
        self.runs = [JobRun(job, histories.get(job.key) or JobHistory(job.key)) for job in jobs]
        self.slots = [Slot(s) for s in servers]
        self.queue = WorkQueue()
        self.progress = progress or Progress(self)
        self.token = uuid.uuid4().hex[:6]  # in every prompt id of this run: no id is ever posted twice
        self.started = time.monotonic()
        self.lock = threading.Lock()

    # -- the ledger ---------------------------------------------------------------------------------------------
    def record(self, run: Optional[JobRun], state: str, **fields) -> dict:
        body = {"state": state, **fields}
        if run is not None:
            body["key"] = run.job.key
        record = self.ledger.append(body)
        if run is not None:
            run.history.add(record)
        return record

    def record_many(self, items: list[tuple[JobRun, str, dict]]) -> None:
        """Records nothing waits on one by one (the `job` records of a run): one write, one fsync."""
        written = self.ledger.append_many([{"state": state, **fields, "key": run.job.key}
                                           for run, state, fields in items])
        for (run, _, _), record in zip(items, written):
            run.history.add(record)

    # -- before the first job -----------------------------------------------------------------------------------
    def start_servers(self) -> None:
        """Start (or reach) every server, each from its own long-lived thread.

        A started ComfyUI is bound to the thread that started it (PR_SET_PDEATHSIG fires when that thread ends), so
        the same thread later serves the server's jobs and stops it.
        """
        self.errors: list[str] = []
        self.go = threading.Event()
        self.threads = []
        for slot in self.slots:
            slot.ready = threading.Event()
            t = threading.Thread(target=self._life, args=(slot,), name=f"serve-{slot.name}", daemon=True)
            t.start()
            self.threads.append(t)
        for slot in self.slots:
            while not slot.ready.wait(0.5):
                self.progress.tick()
        if self.errors:
            raise Refused("server(s) could not be started or reached:\n  " + "\n  ".join(self.errors), EXIT_SERVER)

    def _life(self, slot: Slot) -> None:
        try:
            try:
                self._joined(slot, slot.server.start(), "started")
            except ServerDown as exc:
                self.errors.append(f"{slot.name}: {exc}")
                slot.status = "did not start"
                return
            finally:
                slot.ready.set()
            while not self.go.wait(0.5):
                if self.queue.stopping:
                    return
            if not self.queue.stopping:
                self.serve(slot)
        finally:
            slot.up = False
            slot.server.close()

    def _joined(self, slot: Slot, info: dict, event: str) -> None:
        slot.url, slot.pid, slot.up, slot.status = info.get("url", ""), info.get("pid"), True, "idle"
        for path in self.inputs:
            slot.server.upload(path.name, path.read_bytes())
        self.record(None, "server", server=slot.name, url=slot.url, pid=slot.pid, event=event,
                    **({"actor_pid": info["actor_pid"]} if "actor_pid" in info else {}))
        self.progress.event(f"{slot.name} {event} at {slot.url}" + (f" (pid {slot.pid})" if slot.pid else ""))
        while slot.orphans:
            prompt_id = slot.orphans[0]
            found = slot.server.withdraw(prompt_id)  # ServerDown here: the server went again, heal goes on
            slot.orphans.pop(0)
            # "finished": it ran there after all, beside the attempt that replaced it (the one case of a job run
            # twice: its server could not be reached for the whole --rejoin-timeout): on the ledger for the record.
            self.record(None, "server", server=slot.name, url=slot.url, pid=slot.pid, event="withdrawn",
                        prompt_id=prompt_id, found=found)
            self.progress.event(f"{slot.name}: prompt {prompt_id}, requeued while unreachable, was {found} there"
                                + ("" if found == "finished" else " (withdrawn)"))

    def validate(self) -> None:
        """Convert and check every job on every server; refuse the batch when a server lacks models."""
        try:
            infos = {slot.name: slot.server.object_info() for slot in self.slots}
        except ServerDown as exc:
            raise Refused(f"a server went away before the batch started: {exc}", EXIT_SERVER) from None
        first = infos[self.slots[0].name]
        missing, differ, pack_texts = [], [], {}
        for run in self.runs:
            try:
                run.prompt = prepare_prompt(run.job.workflow, run.job.overrides, first)
                unique_prefixes(run.prompt, "check")
            except WorkflowError as exc:
                self._invalid(run, str(exc))
                continue
            problems = {name: check_prompt(run.prompt, info) for name, info in infos.items()}
            for slot in self.slots:   # the pack's own list: every missing model with its download command
                try:
                    pack = slot.server.missing_models(run.prompt)
                except ServerDown as exc:
                    raise Refused(f"a server went away before the batch started: {exc}", EXIT_SERVER) from None
                if pack is not None:
                    problems[slot.name] = without_pack_models(problems[slot.name], run.prompt)
                    if pack.get("text"):
                        pack_texts.setdefault((slot.name, pack["text"]), []).append(run.job.name)
            # A model file is the server's business, not the job's: refuse rather than fail every job.
            models = [f"{name}: {run.job.name}: {p}" for name, found in problems.items() for p in found
                      if "is not in models/" in p]
            if models:
                missing += models
            elif len({tuple(p) for p in problems.values()}) > 1:
                differ += [f"{name}: {run.job.name}: {p}" for name, found in problems.items() for p in found]
            elif problems[self.slots[0].name]:
                self._invalid(run, "; ".join(problems[self.slots[0].name]))
        if missing or pack_texts:
            parts = [f"{server} (jobs {', '.join(jobs)}):\n{text}" for (server, text), jobs in pack_texts.items()]
            if missing:
                parts.append("Put these in the shared models folder:\n  " + "\n  ".join(dict.fromkeys(missing)))
            raise Refused("models are missing; nothing was queued.\n\n" + "\n\n".join(parts), EXIT_MODELS)
        if differ:
            raise Refused("the servers do not offer the same files or nodes; nothing was queued:\n  "
                          + "\n  ".join(dict.fromkeys(differ)), EXIT_MODELS)

    def _invalid(self, run: JobRun, error: str) -> None:
        run.state, run.error = "invalid", error
        self.record(run, "invalid", error=error)
        self.progress.event(f"{run.job.name}: invalid: {error}")

    def plan(self) -> None:
        """Skip what is done, adopt what is in flight on a server of this run, queue the rest."""
        by_url = {slot.url: slot for slot in self.slots}
        self.record_many([(run, "job", run.job.describe()) for run in self.runs if run.state != "invalid"])
        for run in self.runs:
            if run.state == "invalid":
                continue
            done = run.history.done_record()
            if done is not None:
                why_not = verify_done(done)
                if why_not is None:
                    self._skip(run, done)
                    continue
                self.progress.event(f"{run.job.name}: was done but {why_not}; running it again")
            flight = run.history.in_flight()
            if flight is not None:
                slot = by_url.get(flight.get("url"))
                where = "unknown"
                if slot is not None:
                    try:
                        where = slot.server.lookup(flight["prompt_id"])
                    except ServerDown:
                        where = "unknown"
                if where in ("finished", "queued"):
                    slot.adopt.append((run, flight))
                    self.queue.in_flight += 1
                    continue
                self.record(run, "retry", attempt=flight["attempt"], kind="lost",
                            error=f"prompt {flight['prompt_id']} is not on {flight.get('server')} any more "
                                  "(the server restarted or the runner stopped before queueing it)")
            self.queue.put(run)

    # -- dispatch -----------------------------------------------------------------------------------------------
    def serve(self, slot: Slot) -> None:
        """One server's loop: adopted prompts first, then jobs from the queue; heal the server when it dies.

        The next job is posted the moment the server has finished the previous prompt (`_finish`), before that
        prompt's outputs are copied and its `done` record written: the server never waits for the runner's
        bookkeeping, and it still holds one prompt at a time (a job is taken only when this server is free, so a
        slow server takes fewer jobs).
        """
        for run, flight in slot.adopt:
            self._finish(slot, self._adopt(slot, run, flight), take_next=False)
        ahead: Optional[Attempt] = None  # posted here while the previous attempt's outputs were being copied
        while ahead is not None or not self.queue.stopping:
            if ahead is not None:
                ahead = self._finish(slot, ahead)
                continue
            if not slot.up:
                if not self._heal(slot):
                    return
                continue
            run = self.queue.take(slot.name, lambda: self._others_up(slot))
            if run is None:
                return
            ahead = self._submit(slot, run)

    def _others_up(self, slot: Slot) -> bool:
        return any(s.up for s in self.slots if s is not slot)

    def _heal(self, slot: Slot) -> bool:
        while not self.queue.finished():
            if slot.restarts >= self.max_restarts:
                slot.gone, slot.status = True, f"gone after {slot.restarts} restarts"
                self.record(None, "server", server=slot.name, url=slot.url, pid=None, event="gone")
                self.progress.event(f"{slot.name} left the batch: {slot.status}")
                return False
            slot.restarts += 1
            slot.status = "restarting" if slot.server.can_restart else "waiting to come back"
            try:
                self._joined(slot, slot.server.heal(self.queue.finished), "rejoined")
            except ServerDown as exc:
                self.progress.event(f"{slot.name}: {exc}")
                continue
            return True
        slot.status = "stopped"
        return False

    def _running(self, slot: Slot, run: JobRun, t0: float) -> None:
        slot.job, slot.job_started, slot.status = run, t0, "running"
        run.state, run.server = "running", slot.name

    def _submit(self, slot: Slot, run: JobRun) -> Optional[Attempt]:
        """Post a new attempt of a job (taken from the queue) to this server; None if that failed (recorded)."""
        t0, attempt, prompt_id = time.monotonic(), 0, None
        self._running(slot, run, t0)
        try:
            attempt = run.next_attempt()
            prefix = f"{run.job.key}-a{attempt}-{self.token}"
            # ComfyUI 0.33.0 accepts only canonical UUIDs as prompt ids (0.3.75 took any string): one derived
            # from the attempt's name, so the id is still known before POST /prompt and unique per attempt.
            prompt_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"broadcast-avatar/batch/{prefix}"))
            prompt = unique_prefixes(run.prompt, prefix)
            run.tries += 1
            # Written (and fsync'ed) before POST /prompt: a runner that dies in between still finds the prompt on
            # resume, so it is adopted, never posted again.
            self.record(run, "submitted", attempt=attempt, server=slot.name, url=slot.url,
                        prompt_id=prompt_id, prefix=prefix)
            att = Attempt(run, attempt, prompt_id, t0)
            try:
                slot.server.submit(prompt, prompt_id)
            except ServerDown as exc:
                # The POST may have reached the server with only its answer lost: the server says whether it has the
                # prompt (then the attempt goes on there) or not (then it is posted again, elsewhere if possible).
                if self._settle(slot, att, exc) == "unknown":
                    raise NotThere(f"{slot.name}: POST /prompt failed ({exc}) and the server has no prompt "
                                   f"{prompt_id}") from None
            return att
        except Exception as exc:
            self._failed_attempt(slot, run, attempt, exc, prompt_id)
            self._release(slot, run)
            return None

    def _adopt(self, slot: Slot, run: JobRun, flight: dict) -> Attempt:
        self._running(slot, run, time.monotonic())
        run.how = "adopted"
        self.progress.event(f"{run.job.name}: adopted prompt {flight['prompt_id']} from {slot.name}")
        return Attempt(run, flight["attempt"], flight["prompt_id"], slot.job_started)

    def _finish(self, slot: Slot, att: Attempt, take_next: bool = True) -> Optional[Attempt]:
        """Wait for an attempt on its server and record its outcome; returns the next attempt if one was posted.

        Once the server has finished this prompt (and only if it succeeded there), the next job waiting in the
        queue is posted before this one's outputs are copied, hashed and recorded.
        """
        run, ahead, entry = att.run, None, None
        try:
            while True:
                try:
                    if entry is None:
                        left = self.job_timeout - (time.monotonic() - att.started)
                        entry = slot.server.wait(att.prompt_id, max(left, 1.0), lambda: self.queue.stopping)
                    if take_next and slot.up and ahead is None:
                        nxt = self.queue.take_now(slot.name, lambda: self._others_up(slot))
                        if nxt is not None:
                            ahead = self._submit(slot, nxt)
                    files = self._collect(slot, run, entry)
                    break
                except ServerDown as exc:
                    # A failed connection (/history, the websocket's server, /view): the prompt is asked after on its
                    # server; queued or running, it is waited for again; finished, its entry and outputs are read
                    # again. Only a prompt the server does not have is run again (elsewhere).
                    if self._settle(slot, att, exc) == "unknown":
                        raise NotThere(f"{slot.name}: {exc}; the server no longer has prompt {att.prompt_id} "
                                       "(it restarted)") from None
            run.seconds = round(time.monotonic() - att.started, 3)
            run.files, run.qc = files, qc_verdicts(entry)
            self.record(run, "done", attempt=att.number, server=slot.name, prompt_id=att.prompt_id, files=files,
                        qc=run.qc, seconds=run.seconds)
            run.state, run.how = "done", run.how or "ran"
            slot.done += 1
            self.progress.done(run)
        except Exception as exc:
            self._failed_attempt(slot, run, att.number, exc, att.prompt_id)
        finally:
            self._release(slot, run)
        return ahead

    def _settle(self, slot: Slot, att: Attempt, exc: Exception) -> str:
        """A connection to the attempt's server failed (`exc`): where its prompt stands there, "finished", "queued"
        (pending or running) or "unknown" (the server does not have it), recorded as a `fault` record.

        A server that cannot be asked (`locate` gives up), or that failed `MAX_FAULTS` times in this attempt, raises
        `ServerDown`, after its prompt was withdrawn or the server stopped (`_withdraw`): the job then goes to
        another server and cannot run on this one as well.
        """
        att.faults += 1
        self.progress.event(f"{att.run.job.name}: {exc}; asking {slot.name} where prompt {att.prompt_id} stands")
        try:
            if att.faults > MAX_FAULTS:
                raise ServerDown(f"{slot.name}: {att.faults} failed connections in one attempt")
            found = slot.server.locate(att.prompt_id, lambda: self.queue.stopping)
        except ServerDown:
            self._withdraw(slot, att.prompt_id)
            raise
        self.record(att.run, "fault", attempt=att.number, server=slot.name, prompt_id=att.prompt_id,
                    error=str(exc), found=found)
        return found

    def _withdraw(self, slot: Slot, prompt_id: str) -> bool:
        """Before a job leaves a server for another: make sure its prompt will not run (on) there. True when that is
        confirmed (withdrawn, or the server stopped with it); otherwise it is withdrawn when the server answers
        again (`_joined`), and False."""
        try:
            slot.server.withdraw(prompt_id)
            return True
        except ServerDown as exc:
            if slot.server.stop():
                slot.up, slot.status = False, "down"
                self.progress.event(f"{slot.name}: stopped, so that prompt {prompt_id} cannot run on ({exc})")
                return True
        if prompt_id not in slot.orphans:
            slot.orphans.append(prompt_id)
        self.progress.event(f"{slot.name}: prompt {prompt_id} could not be withdrawn; it will be when the server "
                            "answers again")
        return False

    def _release(self, slot: Slot, run: JobRun) -> None:
        if slot.job is run:
            slot.job = None
            if slot.up:
                slot.status = "idle"
        self.queue.task_done()

    def _failed_attempt(self, slot: Slot, run: JobRun, attempt: int, exc: Exception,
                        prompt_id: Optional[str] = None) -> None:
        """Record why an attempt did not finish: retried (bounded), failed, invalid, or left for the next run.

        Before a retry the prompt must not run, or run on, where it was: a failed prompt has ended there; after a
        connection failure `_settle` has found it gone or withdrawn it; after a timeout or a defect here it is
        withdrawn now.
        """
        if prompt_id is not None and not isinstance(exc, (Stopped, ServerDown, NotThere, PromptFailed, OutputMissing)):
            self._withdraw(slot, prompt_id)
        if isinstance(exc, Stopped):
            run.state = "stopped"
        elif isinstance(exc, NotThere):  # the server answers: it stays up and may take the job again later
            self._retry(run, slot, attempt, "not_on_server", str(exc))
        elif isinstance(exc, ServerDown):
            slot.up, slot.status = False, "down"
            self.progress.event(f"{slot.name} is down ({exc}); {run.job.name} goes to another server")
            self._retry(run, slot, attempt, "server_down", str(exc))
        elif isinstance(exc, PromptFailed):
            if exc.payload.get("rejected"):
                run.state, run.error = "invalid", str(exc)
                self.record(run, "invalid", attempt=attempt, error=str(exc))
                self.progress.event(f"{run.job.name}: invalid: {exc}")
            else:
                run.execution_errors += 1
                self._retry(run, slot, attempt, "execution_error", str(exc),
                            final=run.execution_errors >= MAX_EXECUTION_ERRORS)
        elif isinstance(exc, (TimeoutError, OutputMissing)):
            self._retry(run, slot, attempt, "timeout" if isinstance(exc, TimeoutError) else "no_output", str(exc))
        else:  # a defect here must not lose the job: it is recorded and bounded like the rest
            self.progress.event(f"{run.job.name}: unexpected error on {slot.name}:\n"
                                + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
            self._retry(run, slot, attempt, "internal", f"{type(exc).__name__}: {exc}")

    def _collect(self, slot: Slot, run: JobRun, entry: dict) -> list[dict]:
        items = output_items(entry)
        if not items:
            raise OutputMissing("the prompt finished with no output file (answered from ComfyUI's cache?)")
        files = []
        folder = self.out_dir / run.job.name
        for item in items:
            dest = folder / item["filename"]
            digest, size = fetch(slot.server, item, dest)
            files.append({"path": str(dest.resolve()), "sha256": digest, "bytes": size,
                          "server_file": item})
        return files

    def _retry(self, run: JobRun, slot: Slot, attempt: int, kind: str, error: str, final: bool = False) -> None:
        if final or run.tries >= self.max_attempts:
            run.state, run.error = "failed", error
            self.record(run, "failed", attempt=attempt, kind=kind, error=error)
            self.progress.failed(run)
            return
        self.record(run, "retry", attempt=attempt, kind=kind, error=error)
        run.state = "pending"
        self.queue.put(run, frozenset({slot.name}), front=True)

    # -- the whole batch ----------------------------------------------------------------------------------------
    def all_done_already(self) -> bool:
        """True when the ledger shows every job done with its outputs intact (then no server is even started)."""
        for run in self.runs:
            done = run.history.done_record()
            if done is None or verify_done(done) is not None:
                return False
        for run in self.runs:
            self._skip(run, run.history.done_record())
        return True

    @staticmethod
    def _skip(run: JobRun, done: dict) -> None:
        run.state, run.how, run.files, run.qc = "done", "skipped", done["files"], done.get("qc", [])
        run.server, run.seconds = done.get("server", ""), done.get("seconds", 0.0)

    def run(self) -> int:
        if self.all_done_already():
            self.progress.event(f"all {len(self.runs)} jobs are already done (outputs verified); nothing to run")
            return self.exit_code()
        try:
            self.start_servers()
            self.validate()
            self.plan()
            self.progress.begin()
            self.go.set()
            for t in self.threads:
                while t.is_alive():
                    t.join(0.5)
                    self.progress.tick()
            for run in self.queue.drain():  # every server left the batch
                run.state, run.error = "failed", "no server left to run it"
                self.record(run, "failed", error=run.error)
        except KeyboardInterrupt:
            self.progress.event("stopping: prompts in flight stay on the ledger for the next run to adopt")
            return EXIT_STOPPED
        finally:
            self.queue.stop()  # also releases threads still waiting for the go
            self.progress.end()
        return self.exit_code()

    def exit_code(self) -> int:
        if any(run.state != "done" for run in self.runs):
            return EXIT_FAILED
        if any(v["verdict"] == "fail" for run in self.runs for v in run.qc):
            return EXIT_QC
        return EXIT_OK

    def close(self) -> None:
        """Wait for every server thread to stop its server (each stops its own)."""
        deadline = time.monotonic() + 90
        for t in getattr(self, "threads", []):
            t.join(max(deadline - time.monotonic(), 0.1))


def build_servers(args) -> list:
    servers: list = [UrlServer(url, rejoin_timeout=args.rejoin_timeout) for url in args.url]
    gpus = [g.strip() for g in args.gpus.split(",")] if args.gpus else None
    work = Path(args.work_dir or user_cache() / "batch")
    models = args.models_dir or user_cache() / "models"
    for i in range(args.servers):
        gpu = gpus[i % len(gpus)] if gpus else (str(i) if args.gpu else None)
        servers.append(LaunchedServer(f"local-{i + 1}", work / f"server-{i + 1}", models_dir=models, gpu=gpu,
                                      start_timeout=args.start_timeout))
    if args.ray:
        from scripts.batch.ray_actors import ray_servers

        servers = ray_servers(servers, address=args.ray_address, gpu=args.gpu or bool(gpus),
                              temp_dir=args.ray_temp_dir)
    return servers


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("batch", help="JSONL or CSV batch file (one job a line: workflow + overrides)")
    p.add_argument("--workflow", type=Path, help="workflow for lines that name none")
    p.add_argument("--servers", type=int, default=0, help="start this many ComfyUI servers (one per GPU with --gpu)")
    p.add_argument("--url", action="append", default=[], help="use this running ComfyUI (repeatable)")
    p.add_argument("--models-dir", help="the models folder every started server shares (default: <cache>/models)")
    p.add_argument("--work-dir", help="base folders of the started servers (default: <cache>/batch)")
    p.add_argument("--gpu", action="store_true", help="started servers use GPU i each (default: --cpu)")
    p.add_argument("--gpus", help="comma-separated device ids for the started servers (implies --gpu)")
    p.add_argument("--ray", action="store_true", help="one Ray actor per server (pip install -r scripts/env/ray.txt)")
    p.add_argument("--ray-address", help="join this Ray cluster (default: a local one on 127.0.0.1)")
    p.add_argument("--ray-temp-dir", help="the local Ray cluster's session folder (default: Ray's, /tmp/ray)")
    p.add_argument("--input", action="append", default=[], type=Path,
                   help="upload this file to every server's input folder before the batch (repeatable)")
    p.add_argument("--out-dir", type=Path, help="where each job's outputs are copied (default: <batch>.out/)")
    p.add_argument("--ledger", type=Path, help="the ledger file (default: <out-dir>/ledger.jsonl)")
    p.add_argument("--max-attempts", type=int, default=3, help="attempts per job in one run (default 3)")
    p.add_argument("--max-restarts", type=int, default=3, help="restarts per server before it leaves (default 3)")
    p.add_argument("--job-timeout", type=float, default=3600, help="seconds one attempt may take (default 3600)")
    p.add_argument("--start-timeout", type=float, default=300, help="seconds a server may take to start")
    p.add_argument("--rejoin-timeout", type=float, default=600, help="seconds to wait for a URL server to return")
    p.add_argument("--summary-json", type=Path, help="also write the summary here as JSON")
    p.add_argument("--no-progress", action="store_true", help="event lines only, no live progress display")
    args = p.parse_args(argv)
    if not args.url and args.servers <= 0:
        p.error("give --servers N and/or --url URL")
    if args.max_attempts < 1 or args.max_restarts < 0:
        p.error("--max-attempts must be at least 1 and --max-restarts at least 0")
    args.out_dir = args.out_dir or Path(args.batch).with_suffix(".out")
    args.ledger = args.ledger or args.out_dir / "ledger.jsonl"
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    for path in args.input:
        if not path.is_file():
            print(f"error: --input {path}: no such file", file=sys.stderr)
            return EXIT_USAGE
    try:
        jobs = read_batch(Path(args.batch), args.workflow, tuple(args.input))
    except (BatchError, WorkflowError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    ledger = Ledger(args.ledger)
    try:
        ledger.lock()
    except LedgerBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stop_on_signals()
    runner = None
    try:
        servers = build_servers(args)
        runner = BatchRunner(jobs, servers, ledger, args.out_dir, inputs=args.input, max_attempts=args.max_attempts,
                             max_restarts=args.max_restarts, job_timeout=args.job_timeout)
        runner.progress.live = not args.no_progress and sys.stderr.isatty()
        code = runner.run()
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_STOPPED
    finally:
        if runner is not None:
            runner.close()
        if args.ray:
            from scripts.batch.ray_actors import shutdown

            shutdown()
        ledger.unlock()
    print(summary_table(runner))
    if args.summary_json:
        args.summary_json.write_text(json.dumps(runner.progress.summary(), indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())

"""The batch runner's "exactly once" under failed connections, step by step, against a stand-in of ComfyUI's queue.

The stand-in keeps ComfyUI's rules that matter here: a prompt that reached the server runs whether or not anyone
is waiting for it (its queue worker does not know the client), unless it is deleted from the queue first or the
server is stopped with it; a finished prompt stays in the history; POST /prompt does not deduplicate. So a job the
runner requeues while its prompt is still on the first server runs twice: `drain()` runs whatever is left on a
server at the end, as the real worker would have, and the executions are counted on the servers. The runner before
this change requeued on every failed connection: it fails all of these tests, six by running the faulted job twice
(every step but the POST that never arrived and the failed question, which it never asked). The same steps against a real ComfyUI behind a proxy that cuts connections are in
tests/comfy/test_batch_runner.py.
"""
from __future__ import annotations

import pytest

from scripts.batch import servers as batch_servers
from scripts.batch.ledger import Ledger, sha256_file
from scripts.batch.servers import ServerDown, _Backend
from scripts.run_batch import EXIT_OK
from tests.unit.test_batch_ledger import InProcessServer, _runner, workflow  # noqa: F401 (fixture)

STEPS = ("post_lost", "post_cut", "wait_running", "wait_done", "view", "ask", "gone")


class FaultyServer(InProcessServer):
    """A server whose connections fail at chosen steps (`faults`: [(step, job value)], each used once, by whichever
    server meets it first: the list may be shared, as which server takes which job is up to the dispatcher):

    - ``post_lost``: POST /prompt reached the server and queued the prompt; the answer was lost;
    - ``post_cut``: the POST never arrived;
    - ``wait_running``: following the prompt (/history, websocket) failed while it was still queued or running;
    - ``wait_done``: reading its history entry failed after it had finished;
    - ``view``: the download of its output broke after the first chunk;
    - ``ask``: as ``wait_running``, and the first question where the prompt stands failed too;
    - ``gone``: as ``wait_running``, and then the server answered nothing until it was stopped or came back.
    """

    def __init__(self, name, folder, faults=None, can_restart=True):
        super().__init__(name, folder)
        self.faults = faults if faults is not None else []
        self.fired: list[tuple[str, int]] = []
        self.can_restart = can_restart
        self.ran: dict[str, int] = {}       # prompt id -> executions
        self.value: dict[str, int] = {}     # prompt id -> the job's Save.value
        self.reads = 0

    def _fault(self, step, value) -> bool:
        with self.lock:
            if (step, value) in self.faults:
                self.faults.remove((step, value))
                self.fired.append((step, value))
                return True
            return False

    def _run(self, prompt_id):
        """What the server's worker does with a queued prompt: run it once, write its file, keep its history."""
        if prompt_id in self.history or prompt_id not in self.prompts:
            return
        self.ran[prompt_id] = self.ran.get(prompt_id, 0) + 1
        InProcessServer.wait(self, prompt_id, 60)

    def drain(self):
        for prompt_id in list(self.prompts):
            self._run(prompt_id)

    def submit(self, prompt, prompt_id):
        if self.down:
            raise ServerDown(f"{self.name}: connection refused")
        value = prompt["1"]["inputs"]["value"]
        if self._fault("post_cut", value):
            raise ServerDown(f"{self.name}: connection reset during POST /prompt")
        super().submit(prompt, prompt_id)
        self.value[prompt_id] = value
        if self._fault("post_lost", value):
            raise ServerDown(f"{self.name}: POST /prompt: RemoteDisconnected (no answer)")

    def wait(self, prompt_id, timeout, should_stop=None):
        if self.down:
            raise ServerDown(f"{self.name}: connection refused")
        value = self.value[prompt_id]
        for step in ("wait_running", "ask", "gone"):
            if self._fault(step, value):
                if step == "ask":
                    with self.lock:
                        self.faults.insert(0, ("lookup", value))
                if step == "gone":
                    self.down = True
                raise ServerDown(f"{self.name}: GET /history: connection reset")
        self._run(prompt_id)
        if self._fault("wait_done", value):
            raise ServerDown(f"{self.name}: GET /history: IncompleteRead")
        return self.history[prompt_id]

    def lookup(self, prompt_id):
        if self._fault("lookup", self.value.get(prompt_id)):
            raise ServerDown(f"{self.name}: GET /queue: connection reset")
        return super().lookup(prompt_id)

    # The runner's own question loop (asked again until the server answers), over this server's answers.
    locate = _Backend.locate
    confirm_timeout = 5.0

    def may_answer(self):
        return not self.down

    def read(self, item, offset, size=1 << 20):
        if self.down:
            raise ServerDown(f"{self.name}: connection refused")
        self.reads += 1
        prompt_id = next(p for p, h in self.history.items()
                         if h["outputs"] and h["outputs"]["1"]["files"][0]["filename"] == item["filename"])
        if offset and self._fault("view", self.value[prompt_id]):
            raise ServerDown(f"{self.name}: GET /view {item['filename']}: IncompleteRead")
        return super().read(item, offset, size)

    def stop(self):
        stopped = super().stop()
        if stopped:
            self.down = False  # a started server comes back empty when healed
        return stopped


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Outputs read in several chunks (so a download can break in the middle), no pause between questions."""
    monkeypatch.setattr(batch_servers, "READ_CHUNK", 8)
    monkeypatch.setattr(batch_servers, "ASK_EVERY", 0.0)


def check_exactly_once(runner, servers, values):
    """Counted on the servers (every prompt run to the end, as their workers would) and in the output folder."""
    for s in servers:
        s.drain()
    ran = {}
    for s in servers:
        for prompt_id, n in s.ran.items():
            ran[s.value[prompt_id]] = ran.get(s.value[prompt_id], 0) + n
    assert ran == {v: 1 for v in values}, f"executions per job: {ran}"
    done = [r for r in runner.ledger.records() if r["state"] == "done"]
    assert sorted(r["key"] for r in done) == sorted(run.job.key for run in runner.runs)  # one done record each
    for run in runner.runs:
        (item,) = run.history.done_record()["files"]
        copies = list((runner.out_dir / run.job.name).iterdir())
        assert [p.name for p in copies] == [item["server_file"]["filename"]], copies  # written once, no .part left
        assert sha256_file(copies[0]) == item["sha256"]
        # The copy holds the prompt id of the one execution (the stand-in writes it into the file).
        executed = copies[0].read_text()
        assert executed in {p for s in servers for p in s.ran}, executed


@pytest.mark.parametrize("step", STEPS)
def test_each_failed_connection_leaves_every_job_run_once(tmp_path, workflow, step):  # noqa: F811
    values = [1, 2, 3]
    faults = [(step, 2)]
    a, b = FaultyServer("a", tmp_path / "a", faults), FaultyServer("b", tmp_path / "b", faults)
    runner = _runner(tmp_path, workflow, values, [a, b], max_restarts=5)
    assert runner.run() == EXIT_OK
    fired = a.fired + b.fired
    assert fired == ([(step, 2), ("lookup", 2)] if step == "ask" else [(step, 2)]), fired
    check_exactly_once(runner, [a, b], values)
    records = list(Ledger(runner.ledger.path).records())
    faults = [r for r in records if r["state"] == "fault"]
    retries = [r for r in records if r["state"] == "retry"]
    if step in ("post_lost", "wait_running", "wait_done", "view", "ask"):
        # The server answered: the attempt went on there, nothing was retried.
        assert [r["found"] for r in faults] == [
            {"post_lost": "queued", "wait_running": "queued", "ask": "queued"}.get(step, "finished")]
        assert retries == [] and a.restarts + b.restarts == 0
    elif step == "post_cut":
        assert [r["found"] for r in faults] == ["unknown"]
        assert [r["kind"] for r in retries] == ["not_on_server"] and a.restarts + b.restarts == 0
    else:  # gone: the started server was stopped with its prompt before the job went to the other one
        assert faults == [] and [r["kind"] for r in retries] == ["server_down"] and a.restarts + b.restarts == 1


def test_a_url_server_that_cannot_be_asked_has_its_prompt_withdrawn_when_it_answers(tmp_path, workflow):  # noqa: F811
    """A server the runner does not own cannot be stopped: the job goes elsewhere after the wait for an answer, and
    its prompt is deleted there the moment the server answers again, before its worker got to it."""
    values = [1, 2]
    faults = [("gone", 1)]
    a = FaultyServer("a", tmp_path / "a", faults, can_restart=False)
    b = FaultyServer("b", tmp_path / "b", faults, can_restart=False)
    runner = _runner(tmp_path, workflow, values, [a, b], max_restarts=5)
    assert runner.run() == EXIT_OK
    assert a.fired + b.fired == [("gone", 1)]
    check_exactly_once(runner, [a, b], values)
    gone = "a" if a.fired else "b"
    withdrawn = [r for r in runner.ledger.servers() if r["event"] == "withdrawn"]
    assert [(r["server"], r["found"]) for r in withdrawn] == [(gone, "unknown")]
    retried = [r for r in runner.ledger.records() if r["state"] == "retry"]
    assert [(r["kind"], r["attempt"]) for r in retried] == [("server_down", 1)]


def test_every_fault_in_one_batch(tmp_path, workflow):  # noqa: F811
    """All the steps at once, several on the same job, over two faulty servers."""
    values = [1, 2, 3, 4, 5, 6]
    faults = [("post_lost", 1), ("wait_running", 1), ("view", 1), ("wait_done", 2), ("view", 2), ("ask", 3),
              ("post_lost", 3), ("post_cut", 4), ("post_lost", 4), ("post_lost", 5), ("wait_running", 5),
              ("wait_done", 6), ("gone", 6)]
    planned = list(faults)
    a, b = FaultyServer("a", tmp_path / "a", faults), FaultyServer("b", tmp_path / "b", faults)
    runner = _runner(tmp_path, workflow, values, [a, b], max_restarts=5)
    assert runner.run() == EXIT_OK
    assert faults == [] and sorted(a.fired + b.fired) == sorted(planned + [("lookup", 3)])
    check_exactly_once(runner, [a, b], values)

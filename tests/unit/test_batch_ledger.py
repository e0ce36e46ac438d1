"""The batch runner without ComfyUI: ledger atomicity and resume state, batch files and job keys, unique prefixes,
history parsing (outputs, `broadcast_qc` verdicts), and the dispatcher's retry rules against in-process servers.

The real servers, kills and resumes are in tests/comfy/test_batch_runner.py; here each rule is pinned on its own.
"""
from __future__ import annotations

import json
import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from scripts.batch.jobs import BatchError, output_items, qc_verdicts, read_batch, unique_prefixes
from scripts.batch.ledger import Ledger, LedgerBusy, sha256_file, verify_done
from scripts.batch.servers import ServerDown
from scripts.comfyui.client import PromptFailed
from scripts.run_batch import (EXIT_FAILED, EXIT_MODELS, EXIT_OK, EXIT_QC, BatchRunner, Refused)
from scripts.workflow.api import WorkflowError

SAVE = {"1": {"class_type": "TestSave", "_meta": {"title": "Save"},
              "inputs": {"filename_prefix": "news/item", "value": 1, "model": "tiny.safetensors"}}}
OBJECT_INFO = {"TestSave": {"input": {"required": {
    "filename_prefix": ["STRING", {}], "value": ["INT", {}], "model": [["tiny.safetensors"], {}]}}}}


# -- ledger ---------------------------------------------------------------------------------------------------------
def _append_many(path, worker, n):
    ledger = Ledger(path)
    for i in range(n):
        ledger.append({"state": "retry", "key": f"w{worker}", "attempt": i, "error": "x" * (i * 37 % 3000)})


def test_appends_from_many_processes_never_interleave(tmp_path):
    path = tmp_path / "ledger.jsonl"
    procs = [multiprocessing.Process(target=_append_many, args=(path, w, 150)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])
    jobs = Ledger(path).jobs()
    assert sorted(jobs) == ["w0", "w1", "w2", "w3"]
    assert all([r["attempt"] for r in h.records] == list(range(150)) for h in jobs.values())


def test_a_torn_last_line_is_skipped_and_the_next_record_starts_a_new_line(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append({"state": "submitted", "key": "k", "attempt": 1, "prompt_id": "p1", "url": "u"})
    with open(ledger.path, "ab") as f:
        f.write(b'{"state": "done", "key": "k", "att')  # the runner died mid-write
    assert ledger.jobs()["k"].in_flight()["prompt_id"] == "p1"
    ledger.append({"state": "retry", "key": "k", "attempt": 1})
    states = [r["state"] for r in ledger.records()]
    assert states == ["submitted", "retry"]
    assert ledger.jobs()["k"].state == "retry" and ledger.jobs()["k"].in_flight() is None


def test_one_runner_per_ledger(tmp_path):
    first = Ledger(tmp_path / "l.jsonl").lock()
    with pytest.raises(LedgerBusy, match="another batch runner"):
        Ledger(tmp_path / "l.jsonl").lock()
    first.unlock()
    Ledger(tmp_path / "l.jsonl").lock().unlock()


def test_done_means_the_output_is_there_with_its_sha256(tmp_path):
    out = tmp_path / "clip.mp4"
    out.write_bytes(b"frames")
    record = {"files": [{"path": str(out), "sha256": sha256_file(out), "bytes": 6}]}
    assert verify_done(record) is None
    out.write_bytes(b"framez")
    assert "does not match its recorded sha256" in verify_done(record)
    out.unlink()
    assert "is missing" in verify_done(record)
    assert verify_done({"files": []}) == "no output file was recorded"


# -- batch files and keys -----------------------------------------------------------------------------------------
@pytest.fixture()
def workflow(tmp_path):
    path = tmp_path / "save.api.json"
    path.write_text(json.dumps(SAVE))
    return path


def test_jsonl_and_csv_give_the_same_jobs_and_keys(tmp_path, workflow):
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text('# evening\n{"name": "a", "workflow": "save.api.json", "set": {"Save.value": 3}}\n'
                     '\n{"name": "b", "workflow": "save.api.json", "1.value": 4, "Save.filename_prefix": "x y"}\n')
    csv = tmp_path / "b.csv"
    csv.write_text("name,workflow,Save.value,Save.filename_prefix\na,save.api.json,3,\nb,save.api.json,,x y\n")
    a, b = read_batch(jsonl)
    assert (a.name, a.line, a.overrides) == ("a", 2, {"Save.value": 3})
    assert b.overrides == {"1.value": 4, "Save.filename_prefix": "x y"}
    c, d = read_batch(csv)
    assert c.key == a.key and c.overrides == a.overrides and d.overrides == {"Save.filename_prefix": "x y"}


def test_the_key_follows_the_content_not_the_name(tmp_path, workflow):
    def key(line, inputs=()):
        batch = tmp_path / "k.jsonl"
        batch.write_text(json.dumps(line) + "\n")
        return read_batch(batch, inputs=inputs)[0].key
    base = key({"name": "a", "workflow": str(workflow), "set": {"Save.value": 3}})
    assert key({"name": "renamed", "workflow": str(workflow), "set": {"Save.value": 3}}) == base
    assert key({"name": "a", "workflow": str(workflow), "set": {"Save.value": 4}}) != base
    clip = tmp_path / "tiny.safetensors"  # an input file the workflow names: its content is part of the key
    clip.write_bytes(b"one")
    with_input = key({"name": "a", "workflow": str(workflow), "set": {"Save.value": 3}}, (clip,))
    clip.write_bytes(b"two")
    assert key({"name": "a", "workflow": str(workflow), "set": {"Save.value": 3}}, (clip,)) != with_input
    workflow.write_text(json.dumps(SAVE).replace("news/item", "news/other"))
    assert key({"name": "a", "workflow": str(workflow), "set": {"Save.value": 3}}) != base


def test_bad_lines_are_reported_together_by_line(tmp_path, workflow):
    batch = tmp_path / "bad.jsonl"
    batch.write_text("\n".join([
        json.dumps({"name": "a", "workflow": str(workflow)}),
        json.dumps({"name": "b", "workflow": str(workflow)}),                  # same job as line 1
        json.dumps({"name": "a", "workflow": str(workflow), "Save.value": 9}),  # name reused
        json.dumps({"name": "../up", "workflow": str(workflow), "Save.value": 8}),
        json.dumps({"workflow": "missing.json"}),
        json.dumps({"workflow": str(workflow), "voice": "x"}),
    ]) + "\n")
    with pytest.raises(BatchError) as err:
        read_batch(batch)
    text = str(err.value)
    for expected in ("line 2: the same job as line 1", "line 3: name 'a' is already used on line 1",
                     "line 4: name '../up'", "line 5: workflow 'missing.json' is neither",
                     "line 6: unknown field 'voice'"):
        assert expected in text
    batch.write_text("[1, 2]\n")
    with pytest.raises(BatchError, match="line 1: expected a JSON object"):
        read_batch(batch)


# -- prompts and history ------------------------------------------------------------------------------------------
def test_every_attempt_gets_its_own_prefix():
    tagged = unique_prefixes(SAVE, "k1-a2-xyz")
    assert tagged["1"]["inputs"]["filename_prefix"] == "news/item_k1-a2-xyz"
    assert SAVE["1"]["inputs"]["filename_prefix"] == "news/item"  # the job's own prompt is untouched
    with pytest.raises(WorkflowError, match="no node with a filename_prefix"):
        unique_prefixes({"1": {"class_type": "PreviewImage", "inputs": {"images": ["2", 0]}}}, "t")


def test_outputs_and_qc_verdicts_from_a_history_entry():
    entry = {"outputs": {
        "2": {"images": [{"filename": "clip_00001.mp4", "subfolder": "news", "type": "output"},
                         {"filename": "prev.png", "subfolder": "", "type": "temp"}], "text": ["2.0 s"]},
        "7": {"broadcast_qc": [{"verdict": "fail", "failed": ["loudness"], "report": {"lufs": -9.1}}]},
        "8": {"broadcast_qc": [{"verdict": "pass", "failed": [], "report": {}}, "garbage"]},
    }}
    assert output_items(entry) == [{"filename": "clip_00001.mp4", "subfolder": "news", "type": "output"}]
    verdicts = qc_verdicts(entry)
    assert [(v["node"], v["verdict"], v["failed"]) for v in verdicts] == [
        ("7", "fail", ["loudness"]), ("8", "pass", []), ("8", "fail", ["malformed broadcast_qc"])]
    assert verdicts[0]["report"] == {"lufs": -9.1}
    assert output_items({"outputs": {}}) == [] and qc_verdicts({"outputs": {}}) == []


# -- the dispatcher against in-process servers --------------------------------------------------------------------
class InProcessServer:
    """A server double for the dispatcher's rules: "runs" a prompt by writing a file named after its prefix.

    `script` maps a job's Save.value to what happens to its attempts, in order, on whichever server (the dict may
    be shared): "ok", "down" (ServerDown: the server stops answering anything until it is healed),
    "error" (execution error), "reject" (validation rejection), "empty" (success with no outputs), "qc_fail".
    """

    can_restart = True

    lock = threading.Lock()  # the script may be shared by several servers

    def __init__(self, name, folder: Path, script=None, info=OBJECT_INFO):
        self.name, self.folder, self.script, self.info = name, folder, script if script is not None else {}, info
        self.executed: list[str] = []
        self.restarts = 0
        self.prompts: dict = {}
        self.history: dict = {}  # like ComfyUI's: a prompt runs once; waiting on it again reads its entry
        self.down = False

    def start(self):
        return {"url": f"inproc://{self.name}", "pid": None}

    def heal(self, should_stop=lambda: False):
        self.restarts += 1
        self.down = False
        return self.start()

    def object_info(self):
        return self.info

    def missing_models(self, prompt):
        return None   # as a server without the Broadcast Avatar pack: no missing-model route

    def upload(self, name, data):
        pass

    def _next(self, prompt):
        with self.lock:
            plan = self.script.get(prompt["1"]["inputs"]["value"], [])
            return plan.pop(0) if plan else "ok"

    def submit(self, prompt, prompt_id):
        what = self._next(prompt)
        if what == "reject":
            raise PromptFailed("prompt rejected: value out of range", {"rejected": True})
        if what == "down":
            self.down = True
            raise ServerDown(f"{self.name}: connection refused")
        self.prompts[prompt_id] = (what, prompt)

    def wait(self, prompt_id, timeout, should_stop=None):
        if prompt_id in self.history:
            return self.history[prompt_id]
        what, prompt = self.prompts[prompt_id]
        if what == "error":
            raise PromptFailed("node 1 (TestSave): RuntimeError: boom", {"exception_type": "RuntimeError"})
        outputs = {}
        if what != "empty":
            name = prompt["1"]["inputs"]["filename_prefix"].replace("/", "_") + "_00001.bin"
            (self.folder / name).write_bytes(prompt_id.encode())
            self.executed.append(prompt_id)
            outputs = {"1": {"files": [{"filename": name, "subfolder": "", "type": "output"}]}}
        if what == "qc_fail":
            outputs["9"] = {"broadcast_qc": [{"verdict": "fail", "failed": ["black_frames"], "report": {}}]}
        self.history[prompt_id] = {"outputs": outputs,
                                   "status": {"status_str": "success", "completed": True, "messages": []}}
        return self.history[prompt_id]

    def lookup(self, prompt_id):
        """As ComfyUI answers it: in its history, still in its queue, or never seen (or deleted)."""
        if self.down:
            raise ServerDown(f"{self.name}: connection refused")
        if prompt_id in self.history:
            return "finished"
        return "queued" if prompt_id in self.prompts else "unknown"

    def locate(self, prompt_id, should_stop=None):
        return self.lookup(prompt_id)

    def withdraw(self, prompt_id):
        """POST /queue {"delete": [id]}: a prompt that has not run yet never will."""
        found = self.lookup(prompt_id)
        if found == "queued":
            del self.prompts[prompt_id]
            return "unknown"
        return found

    def stop(self):
        """A started server: stopped, with every prompt it had not run."""
        if self.can_restart:
            self.prompts = {k: v for k, v in self.prompts.items() if k in self.history}
        return self.can_restart

    def read(self, item, offset, size=1 << 20):
        return (self.folder / item["filename"]).read_bytes()[offset:offset + size]

    def close(self):
        pass


def _runner(tmp_path, workflow, values, servers, **kw):
    batch = tmp_path / "b.jsonl"
    batch.write_text("".join(json.dumps({"name": f"j{v}", "workflow": str(workflow), "Save.value": v}) + "\n"
                             for v in values))
    for s in servers:
        s.folder.mkdir(exist_ok=True)
    runner = BatchRunner(read_batch(batch), servers, Ledger(tmp_path / "ledger.jsonl"), tmp_path / "out", **kw)
    return runner


def test_retry_rules_and_exit_codes(tmp_path, workflow):
    script = {1: ["down"], 2: ["error", "error"], 3: ["reject"], 4: ["empty"], 5: ["error"], 6: ["down"] * 3}
    a, b = InProcessServer("a", tmp_path / "a", script), InProcessServer("b", tmp_path / "b", script)
    runner = _runner(tmp_path, workflow, [1, 2, 3, 4, 5, 6, 7], [a, b], max_attempts=3, max_restarts=10)
    assert runner.run() == EXIT_FAILED
    state = {r.job.name: (r.state, r.tries) for r in runner.runs}
    assert state["j1"] == ("done", 2)          # server down: requeued to the other server
    assert state["j2"] == ("failed", 2)        # an execution error is retried once, then reported
    assert state["j3"] == ("invalid", 1)       # a rejected prompt is not retried
    assert state["j4"] == ("done", 2)          # "success" with no file is not done
    assert state["j5"] == ("done", 2)          # an execution error once: the retry succeeded
    assert state["j6"] == ("failed", 3)        # bounded attempts
    assert state["j7"] == ("done", 1)
    assert a.restarts + b.restarts >= 2        # every ServerDown heals the server
    # Nothing ran twice: one executed prompt per done job.
    executed = a.executed + b.executed
    assert len(executed) == 4 and len({p.split("-a")[0] for p in executed}) == 4
    # Every attempt has its own prompt id and prefix.
    ids = [r["prompt_id"] for r in runner.ledger.records() if r["state"] == "submitted"]
    assert len(ids) == len(set(ids)) == sum(t for _, t in state.values())


def test_resume_skips_done_reruns_corrupt_and_qc_fail_is_exit_5(tmp_path, workflow):
    a = InProcessServer("a", tmp_path / "a", {2: ["qc_fail"]})
    assert _runner(tmp_path, workflow, [1, 2, 3], [a]).run() == EXIT_QC
    qc = [r["qc"] for r in Ledger(tmp_path / "ledger.jsonl").records() if r["state"] == "done"]
    assert [v["verdict"] for q in qc for v in q] == ["fail"]
    done = {r.job.name: r for r in _runner(tmp_path, workflow, [1, 2, 3], [a]).runs}
    Path(done["j3"].history.done_record()["files"][0]["path"]).write_bytes(b"corrupt")
    again = _runner(tmp_path, workflow, [1, 2, 3], [a])
    assert again.run() == EXIT_QC               # the QC verdict stays recorded for the skipped job
    how = {r.job.name: r.how for r in again.runs}
    assert how == {"j1": "skipped", "j2": "skipped", "j3": "ran"}
    assert len(a.executed) == 4
    a.script = {}
    assert _runner(tmp_path, workflow, [1, 3], [a]).run() == EXIT_OK


class SlowCopyServer(InProcessServer):
    """Its first output copy stalls until `gate` is set, as a slow read or a runner killed while copying would."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.copying, self.gate = threading.Event(), threading.Event()

    def read(self, item, offset, size=1 << 20):
        if not self.copying.is_set():
            self.copying.set()
            self.gate.wait(20)
        return super().read(item, offset, size)


def test_the_next_job_is_posted_before_the_last_is_recorded_and_a_crash_then_loses_and_reruns_nothing(
        tmp_path, workflow):
    """The server gets its next prompt as soon as it finished the last one, before that one's outputs are copied
    and its `done` record written. A runner killed in that window leaves both attempts `submitted` on disk (each
    record fsync'ed before its POST /prompt): the next run adopts both, posts neither again, and nothing runs twice.
    A copy of the ledger file taken in the window is exactly what a SIGKILL would leave."""
    a = SlowCopyServer("a", tmp_path / "a")
    first = _runner(tmp_path, workflow, [1, 2], [a])
    thread = threading.Thread(target=first.run, daemon=True)
    thread.start()
    try:
        assert a.copying.wait(20), "the first job's outputs were never copied"
        deadline = time.monotonic() + 20
        while len(a.prompts) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        crashed = tmp_path / "crashed.jsonl"
        crashed.write_bytes(first.ledger.path.read_bytes())
        states = {h.key: h.state for h in Ledger(crashed).jobs().values()}
        assert sorted(states.values()) == ["submitted", "submitted"], states  # j2 posted, j1 not yet done

        batch = tmp_path / "b.jsonl"
        resumed = BatchRunner(read_batch(batch), [a], Ledger(crashed), tmp_path / "out2")
        assert resumed.run() == EXIT_OK
        assert {r.job.name: r.how for r in resumed.runs} == {"j1": "adopted", "j2": "adopted"}
        submitted = [r for r in Ledger(crashed).records() if r["state"] == "submitted"]
        assert len(submitted) == 2 and len(a.prompts) == 2   # nothing posted again
        assert sorted(a.executed) == sorted(a.prompts)       # each prompt ran once
    finally:
        a.gate.set()
        thread.join(20)
    assert first.exit_code() == EXIT_OK and sorted(a.executed) == sorted(a.prompts)


def test_job_records_share_one_fsync_and_attempt_records_have_their_own(tmp_path, workflow, monkeypatch):
    import os as os_module

    synced = []
    real_fsync = os_module.fsync
    monkeypatch.setattr("scripts.batch.ledger.os.fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    ledger = Ledger(tmp_path / "l.jsonl")
    ledger.append_many([{"state": "job", "key": f"k{i}"} for i in range(5)])
    assert len(synced) == 1 and [r["key"] for r in ledger.records()] == [f"k{i}" for i in range(5)]
    with open(ledger.path, "ab") as f:
        f.write(b'{"state": "job", "key": "torn')  # a crash in the middle of a many-line write
    ledger.append_many([{"state": "job", "key": "k5"}, {"state": "job", "key": "k6"}])
    assert [r["key"] for r in ledger.records()][-2:] == ["k5", "k6"]

    a = InProcessServer("a", tmp_path / "a")
    runner = _runner(tmp_path, workflow, [1, 2, 3], [a])
    synced.clear()
    assert runner.run() == EXIT_OK
    states = [r["state"] for r in runner.ledger.records()]
    # one for the 3 job records; one per submitted and per done record; the server record; each copied output
    # and the folder it is renamed in
    assert states.count("job") == 3 and len(synced) == 1 + 3 + 3 + 1 + 3 * 2


def test_missing_models_refuse_the_batch_before_anything_is_queued(tmp_path):
    workflow = tmp_path / "ckpt.api.json"
    workflow.write_text(json.dumps({**SAVE, "2": {"class_type": "CheckpointLoaderSimple",
                                                  "inputs": {"ckpt_name": "anchor.safetensors"}}}))

    def info(checkpoints):
        return {**OBJECT_INFO, "CheckpointLoaderSimple": {"input": {"required": {"ckpt_name": [checkpoints, {}]}}}}
    a = InProcessServer("a", tmp_path / "a", info=info(["anchor.safetensors"]))
    b = InProcessServer("b", tmp_path / "b", info=info(["other.safetensors"]))
    runner = _runner(tmp_path, workflow, [1, 2], [a, b])
    with pytest.raises(Refused) as err:
        try:
            runner.start_servers()
            runner.validate()
        finally:
            runner.queue.stop()
    assert err.value.code == EXIT_MODELS
    assert ("b: j1: node 2 (CheckpointLoaderSimple) input ckpt_name: model 'anchor.safetensors' is not in "
            "models/checkpoints") in str(err.value)
    assert not a.prompts and not b.prompts


def test_a_job_with_its_own_problem_is_invalid_and_the_others_run(tmp_path, workflow):
    a = InProcessServer("a", tmp_path / "a")
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"name": "ok", "workflow": str(workflow)}) + "\n"
                     + json.dumps({"name": "bad", "workflow": str(workflow), "Save.nope": 1}) + "\n")
    a.folder.mkdir()
    runner = BatchRunner(read_batch(batch), [a], Ledger(tmp_path / "l.jsonl"), tmp_path / "out")
    assert runner.run() == EXIT_FAILED
    state = {r.job.name: (r.state, r.error) for r in runner.runs}
    assert state["ok"] == ("done", "")
    assert state["bad"][0] == "invalid" and "has no input 'nope'" in state["bad"][1]


def test_every_shipped_api_workflow_reads_as_a_job(tmp_path):
    """Every shipped API twin makes a job and batches with per-attempt prefixes on all its saving nodes, except
    wardrobe_vace_prompt: a preparation workflow writing one shared dataset folder, refused with that reason."""
    from scripts.workflow.layout import STAGES
    from tests.workflow_cases import REPO_ROOT

    twins = sorted((REPO_ROOT / "workflows" / "api").glob("*.api.json"))
    assert sorted(p.name.split(".")[0] for p in twins) == sorted(STAGES)  # every shipped workflow, none left out
    batch = tmp_path / "all.jsonl"
    batch.write_text("".join(json.dumps({"name": p.name.split(".")[0], "workflow": str(p)}) + "\n" for p in twins))
    jobs = read_batch(batch)
    batchable, refused = [], {}
    for job in jobs:
        try:
            tagged = unique_prefixes(job.workflow, "k-a1-t")
        except WorkflowError as exc:
            refused[job.name] = str(exc)
            continue
        batchable.append(job.name)
        prefixes = [n["inputs"]["filename_prefix"] for n in tagged.values() if "filename_prefix" in n["inputs"]]
        assert prefixes and all(p.endswith("_k-a1-t") for p in prefixes), job.name
        # What a speech or mask job makes is kept: each Audio Master feeds a Save Audio, the masks a Save Image.
        saved = {n["inputs"]["images" if n["class_type"] == "SaveImage" else "audio"][0] for n in tagged.values()
                 if n["class_type"] in ("SaveAudio", "SaveImage")}
        masters = {k for k, n in tagged.items() if n["class_type"] == "BroadcastAudioMaster"}
        if job.name.startswith("tts_"):
            assert masters and masters <= saved, f"{job.name}: Audio Master(s) {sorted(masters - saved)} not saved"
        if job.name == "wardrobe_core_sam3_masks":
            mask_images = {k for k, n in tagged.items() if n["class_type"] == "MaskToImage"}
            assert len(mask_images) == 2 and mask_images <= saved
    assert sorted(batchable) == sorted(set(STAGES) - {"wardrobe_vace_prompt"})
    assert list(refused) == ["wardrobe_vace_prompt"]
    reason = refused["wardrobe_vace_prompt"]
    for part in ("a preparation workflow", "SaveTrainingDataset node 5 ('Save Prompt Conditioning')",
                 "one shared folder 'wardrobe_vace_prompt'", "/history does not list", "scripts/run_workflow.py"):
        assert part in reason, reason

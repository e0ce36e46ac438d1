"""scripts/run_batch.py over two real loopback ComfyUI servers, single-process mode (no Ray).

- A server the runner started is SIGKILLed while it runs a job: the job goes to the other server, the killed one is
  restarted and rejoins, and every job finishes exactly once. "Once" is counted on the servers (their logs' "Prompt
  executed" lines and the files in their output folders), not only in the ledger.
- The runner itself is SIGKILLed mid-batch with prompts in flight on two servers reached by URL; the next run skips
  what finished, adopts the in-flight prompts from the servers' /history and queue, and runs the rest; a third run
  starts nothing.
- No process the runner started outlives it (checked by PID), even when the runner is SIGKILLed.
Each test stops by itself (bounded waits); only 127.0.0.1 is used.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scripts.batch.ledger import Ledger, sha256_file
from scripts.comfyui.client import ComfyClient
from scripts.comfyui.server import ComfyServer
from tests.workflow_cases import REPO_ROOT

WORKFLOW = REPO_ROOT / "workflows" / "api" / "demo_export.api.json"
RUNNER = REPO_ROOT / "scripts" / "run_batch.py"
JOBS = 12  # enough work left for the killed server to rejoin and take some (restart = 3-8 jobs here)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    from scripts.sample_clip import SAMPLE_NAME, make_sample_clip

    # Long enough (20 s of 256x448, encoded with x264 "slow") that a job is still running when a server is
    # killed and that work is left when the restarted server rejoins.
    return make_sample_clip(tmp_path_factory.mktemp("clip") / SAMPLE_NAME, seconds=20.0)


def write_batch(folder: Path, n: int = JOBS) -> Path:
    batch = folder / "evening.jsonl"
    batch.write_text("".join(json.dumps({"name": f"item-{i:02d}", "workflow": str(WORKFLOW),
                                         "set": {"Broadcast Export Video.quality": 18 + i,
                                                 "Broadcast Export Video.preset": "slow"}}) + "\n"
                             for i in range(n)))
    return batch


def start_runner(batch: Path, clip: Path, *args) -> subprocess.Popen:
    return subprocess.Popen([os.environ.get("BA_PYTHON") or sys.executable, str(RUNNER), str(batch), "--input",
                             str(clip), "--no-progress", "--summary-json", str(batch.parent / "summary.json"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout: float = 420) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"the runner did not finish within {timeout} s:\n{out[-6000:]}")
    return out


def wait_for(what, timeout: float, proc: subprocess.Popen = None, message: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the runner exited ({proc.returncode}) before {message}:\n{proc.stdout.read()[-6000:]}")
        time.sleep(0.2)
    if proc is not None:
        proc.kill()
    pytest.fail(f"timed out waiting for {message}")


def running_on(ledger: Ledger, url: str) -> list[dict]:
    """Attempts submitted to `url` with no outcome yet, that its server reports as running."""
    open_attempts = [h.in_flight() for h in ledger.jobs().values() if h.in_flight() and h.in_flight()["url"] == url]
    if not open_attempts:
        return []
    try:
        running = {item[1] for item in ComfyClient(url).get("/queue", timeout=5)["queue_running"]}
    except OSError:
        return []
    return [a for a in open_attempts if a["prompt_id"] in running]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def executions(logs) -> int:
    return sum(Path(log).read_text(errors="replace").count("Prompt executed in") for log in logs)


def server_files(output_dirs) -> dict[str, list[Path]]:
    """Every .mp4 in the servers' output folders, by job key (the key is in each attempt's unique prefix)."""
    found: dict[str, list[Path]] = {}
    for folder in output_dirs:
        for path in Path(folder).rglob("*.mp4"):
            key = path.name.split("_")[1].split("-a")[0]
            found.setdefault(key, []).append(path)
    return found


def check_ledger_outputs(ledger: Ledger, n: int) -> dict:
    jobs = ledger.jobs()
    assert len(jobs) == n
    for key, history in jobs.items():
        done = history.done_record()
        assert done is not None, f"{key} is not done: {history.records[-1]}"
        assert [r["state"] for r in history.records].count("done") == 1, f"{key} was done twice"
        (item,) = done["files"]
        assert Path(item["path"]).is_file() and sha256_file(item["path"]) == item["sha256"]
    return jobs


def test_killed_server_rejoins_and_nothing_is_lost_or_run_twice(tmp_path, clip):
    batch = write_batch(tmp_path)
    proc = start_runner(batch, clip, "--servers", "2", "--work-dir", str(tmp_path / "work"),
                        "--models-dir", str(tmp_path / "models"), "--job-timeout", "300")
    ledger = Ledger(tmp_path / "evening.out" / "ledger.jsonl")

    def second_server():
        return next((r for r in ledger.servers() if r["server"] == "local-2"), None)
    victim = wait_for(second_server, 300, proc, "local-2 started")
    killed = wait_for(lambda: running_on(ledger, victim["url"]), 300, proc, "a job running on local-2")[0]
    os.kill(victim["pid"], signal.SIGKILL)
    out = finish(proc)
    assert proc.returncode == 0, out

    jobs = check_ledger_outputs(ledger, JOBS)
    retried = jobs[killed["key"]]
    assert [r["kind"] for r in retried.records if r["state"] == "retry"] == ["server_down"], retried.records
    assert retried.done_record()["server"] == "local-1"  # requeued to the other server, not the dead one
    rejoined = [r for r in ledger.servers() if r["server"] == "local-2" and r["event"] == "rejoined"]
    assert len(rejoined) == 1 and rejoined[0]["pid"] != victim["pid"]
    after = [h.done_record() for h in jobs.values() if h.done_record()["server"] == "local-2"
             and h.done_record()["t"] > rejoined[0]["t"]]
    assert after, "the restarted server ran no job after rejoining"

    # Counted on the servers: one execution and one file per job; the killed attempt wrote nothing.
    bases = [tmp_path / "work" / "server-1", tmp_path / "work" / "server-2"]
    assert executions(b / "comfyui.log" for b in bases) == JOBS
    files = server_files(b / "output" for b in bases)
    assert sorted(files) == sorted(jobs) and all(len(v) == 1 for v in files.values()), files

    # No process outlives the run: both servers as first started and the restarted one.
    pids = {r["pid"] for r in ledger.servers() if r.get("pid")}
    assert len(pids) == 3
    assert not [pid for pid in pids if pid_alive(pid)]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"] == {"done": JOBS}


@pytest.fixture()
def url_servers(tmp_path):
    servers = [ComfyServer(tmp_path / f"server-{i}", python=os.environ.get("BA_PYTHON") or sys.executable)
               for i in (1, 2)]
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


def test_stopped_runner_resumes_skipping_done_and_adopting_in_flight(tmp_path, clip, url_servers):
    batch = write_batch(tmp_path, 8)
    urls = [arg for s in url_servers for arg in ("--url", s.url)]
    ledger = Ledger(tmp_path / "evening.out" / "ledger.jsonl")
    proc = start_runner(batch, clip, *urls)

    def two_done_and_one_running():
        done = sum(1 for h in ledger.jobs().values() if h.done_record())
        return done >= 2 and any(running_on(ledger, s.url) for s in url_servers)
    wait_for(two_done_and_one_running, 300, proc, "two jobs done and one running")
    proc.kill()  # the harshest stop: no clean-up at all
    proc.wait(30)
    before = ledger.jobs()
    done_before = {k for k, h in before.items() if h.done_record()}
    in_flight = {k for k, h in before.items() if h.in_flight()}
    assert in_flight, "nothing was in flight when the runner was killed"

    out = finish(start_runner(batch, clip, *urls))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"] == {"done": 8}, out
    how = {job["key"]: job["how"] for job in summary["jobs"]}
    assert {k for k, h in how.items() if h == "skipped"} == done_before
    adopted = {k for k, h in how.items() if h == "adopted"}
    assert adopted and adopted <= in_flight, (adopted, in_flight)
    jobs = check_ledger_outputs(ledger, 8)
    # An adopted prompt was posted once: it has one submitted record and no retry.
    for key in adopted:
        states = [r["state"] for r in jobs[key].records if r["state"] not in ("job",)]
        assert states == ["submitted", "done"], states
    assert executions(s.log_path for s in url_servers) == 8
    files = server_files(s.output_dir for s in url_servers)
    assert sorted(files) == sorted(jobs) and all(len(v) == 1 for v in files.values()), files

    third = start_runner(batch, clip, *urls)
    out = finish(third, 120)
    assert third.returncode == 0 and "already done" in out, out
    assert executions(s.log_path for s in url_servers) == 8



def test_a_sigkilled_runner_takes_the_servers_it_started_with_it(tmp_path, clip):
    """PR_SET_PDEATHSIG: even with no chance to clean up, no ComfyUI the runner started outlives it."""
    batch = write_batch(tmp_path, 2)
    proc = start_runner(batch, clip, "--servers", "1", "--work-dir", str(tmp_path / "work"),
                        "--models-dir", str(tmp_path / "models"))
    ledger = Ledger(tmp_path / "evening.out" / "ledger.jsonl")
    server = wait_for(lambda: next(iter(ledger.servers()), None), 300, proc, "the server started")
    assert pid_alive(server["pid"])
    proc.kill()
    proc.wait(30)
    wait_for(lambda: not pid_alive(server["pid"]), 20, message="the server to die with the runner")


def test_the_runners_client_is_woken_by_the_real_servers_websocket(comfy):
    """What the runner's speed rests on (docs/batch.md): a real ComfyUI's end-of-prompt message reaches the watcher
    (websocket-client underneath), so `wait` returns on it, not on a /history poll."""
    client = ComfyClient(comfy.url)
    assert client.watch() and client.watching()
    try:
        graph = {"1": {"class_type": "PrimitiveString", "inputs": {"value": f"wake {time.time()}"}},
                 "2": {"class_type": "PreviewAny", "inputs": {"source": ["1", 0]}}}
        prompt_id = client.queue(graph)
        assert client.watcher.wait_for(prompt_id, 60), "no end-of-prompt message on the websocket"
        assert client.wait(prompt_id, timeout=30)["status"]["completed"]
    finally:
        client.unwatch()
    assert not client.watching()


def test_a_shipped_broadcast_runs_through_the_runner_end_to_end(comfy, tmp_path):
    """The shipped broadcast_musetalk twin, on the tiny models and the short CI script its case sets, as one job of a
    batch on the session's server (by URL): done, the one exported .mp4 copied with its sha256 (the same bytes as the
    server's file), Broadcast QC's verdict and report in the `done` record, the exit code following the verdict."""
    from scripts.batch.jobs import unique_prefixes
    from tests.fixtures import broadcast
    from tests.workflow_cases import case_for, shipped_api_twin

    overrides = case_for("broadcast_musetalk").prepare(comfy)   # tiny OmniVoice + MuseTalk, 1.5 s of speech
    batch = tmp_path / "broadcast.jsonl"
    batch.write_text(json.dumps({"name": "evening-01", "workflow": str(shipped_api_twin("broadcast_musetalk")),
                                 "set": overrides}) + "\n")
    out_dir = tmp_path / "out"
    proc = subprocess.run([os.environ.get("BA_PYTHON") or sys.executable, str(RUNNER), str(batch), "--url", comfy.url,
                           "--no-progress", "--out-dir", str(out_dir), "--summary-json", str(tmp_path / "s.json"),
                           "--max-attempts", "1"], capture_output=True, text=True, timeout=600)
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    records = [json.loads(line) for line in (out_dir / "ledger.jsonl").read_text().splitlines()]
    done = [r for r in records if r["state"] == "done"]
    assert [r["state"] for r in records if r["state"] not in ("job", "server")] == ["submitted", "done"], log
    record = done[0]
    [submitted] = [r for r in records if r["state"] == "submitted"]
    prefixes = {n["inputs"]["filename_prefix"] for n in unique_prefixes(json.loads(
        shipped_api_twin("broadcast_musetalk").read_text()), submitted["prefix"]).values()
        if "filename_prefix" in n["inputs"]}
    videos = [f for f in record["files"] if f["path"].endswith(".mp4")]
    assert len(videos) == 1, record["files"]
    video = videos[0]
    copied = Path(video["path"])
    assert copied.parent == out_dir / "evening-01" and copied.stat().st_size == video["bytes"] > 0
    assert sha256_file(copied) == video["sha256"]
    served = comfy.output_dir / video["server_file"]["subfolder"] / video["server_file"]["filename"]
    assert sha256_file(served) == video["sha256"], "the copy is not the server's file"
    server_name = f"{video['server_file']['subfolder']}/{video['server_file']['filename']}"
    assert any(server_name.startswith(p + "_") for p in prefixes), (server_name, prefixes)   # this attempt's own
    frames, fps, sound, rate = broadcast.read_mp4(copied)
    assert frames > 0 and len(sound) / rate == pytest.approx(frames / fps, abs=1.0 / fps + 1e-6)
    # Broadcast QC's verdict on that file, as the runner recorded it (the shape tests/fixtures/broadcast.check_qc
    # pins on the history entry); the tiny random voice may fail some checks: reported, the job still done.
    assert len(record["qc"]) == 1, record["qc"]
    verdict = record["qc"][0]
    report = verdict["report"]
    assert report["source"]["name"] == video["server_file"]["filename"]
    assert set(broadcast.QC_CHECKS) <= set(report["checks"])
    assert verdict["failed"] == [n for n, c in report["checks"].items() if c["status"] == "fail"]
    assert verdict["verdict"] == ("fail" if verdict["failed"] else "pass")
    assert proc.returncode == (5 if verdict["verdict"] == "fail" else 0), log
    summary = json.loads((tmp_path / "s.json").read_text())
    [job] = summary["jobs"]
    assert (job["state"], job["how"], job["tries"], job["qc"], job["files"]) == (
        "done", "ran", 1, [verdict["verdict"]], [f["path"] for f in record["files"]])


def test_dropped_connections_at_every_step_run_each_job_once(comfy, tmp_path):
    """The runner reaches the session's server through a loopback proxy that cuts one connection at each step of a
    job (tests/fixtures/fault_proxy.py): a POST /prompt whose answer is lost after the server queued the prompt, a
    POST that never arrives, the question where a prompt stands (GET /queue) cut short, the websocket cut when a
    prompt starts, a finished prompt's /history answer cut in the middle, an output download (/view) cut in the
    middle. Every job must execute exactly once, counted on the server (the export node's log line naming the file
    it wrote, the history and the output folder), and be copied once with the server file's sha256."""
    from scripts.sample_clip import SAMPLE_NAME, make_sample_clip
    from tests.fixtures.fault_proxy import Cut, FaultProxy

    # The runner uploads the clip into the session server's input folder under SAMPLE_NAME: the default clip (the
    # one other modules' tests expect to find there), not a shorter one.
    clip = make_sample_clip(tmp_path / "clip" / SAMPLE_NAME)
    jobs = 4
    batch = tmp_path / "faults.jsonl"
    batch.write_text("".join(json.dumps({"name": f"cut-{i}", "workflow": str(WORKFLOW),
                                         "set": {"Broadcast Export Video.quality": 30 + i}}) + "\n"
                             for i in range(jobs)))
    cuts = [Cut("POST", "/prompt", "drop_answer"), Cut("POST", "/prompt", "refuse"),
            Cut("GET", "/queue", "cut_answer"),
            Cut("GET", "/ws", "cut_websocket", when=b'"execution_start"'),
            Cut("GET", "/history/", "cut_answer", when=b'"status_str": "success"'),
            Cut("GET", "/view", "cut_answer")]
    log_before = len(comfy.log_text())
    proxy = FaultProxy(comfy.port, cuts)
    try:
        out_dir = tmp_path / "out"
        proc = subprocess.run([os.environ.get("BA_PYTHON") or sys.executable, str(RUNNER), str(batch),
                               "--url", proxy.url, "--input", str(clip), "--no-progress", "--out-dir", str(out_dir)],
                              capture_output=True, text=True, timeout=600)
    finally:
        proxy.close()
    log = proc.stdout[-6000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, log
    assert [c.request for c in cuts if not c.fired.is_set()] == [], [(c.method, c.path, c.action) for c in cuts
                                                                     if not c.fired.is_set()]
    ledger = Ledger(out_dir / "ledger.jsonl")
    histories = check_ledger_outputs(ledger, jobs)
    # One fault record per failed connection of an attempt (a cut met while the runner was asking, e.g. the /history
    # read of its question, is asked again instead): at least the lost POST answer, the refused POST and the broken
    # download. Only the refused POST is posted again; nothing else is retried.
    faults = [r for r in ledger.records() if r["state"] == "fault"]
    assert len(faults) >= 3 and [r["found"] for r in faults].count("unknown") == 1, faults
    assert [r["kind"] for r in ledger.records() if r["state"] == "retry"] == ["not_on_server"]
    # Counted on the server: nothing of the batch left in its queue; per job one history entry, one file, and one
    # line of the export node's log naming the file it wrote (printed while the prompt runs, before its history
    # entry exists: every execution's line is in the log by the time the runner has finished).
    submitted = {r["prompt_id"]: r for r in ledger.records() if r["state"] == "submitted"}
    queue = comfy.get("/queue")
    assert not {item[1] for item in queue["queue_running"] + queue["queue_pending"]} & set(submitted), queue
    history = comfy.get("/history?max_items=10000")
    server_log = comfy.log_text()[log_before:]
    executed = {key: len(re.findall(rf"demo_{key}-a\d+-\w+_\d+\.mp4: \d+ frames", server_log)) for key in histories}
    assert executed == {key: 1 for key in histories}, executed
    ran = [submitted[p]["key"] for p in history if p in submitted]
    assert sorted(ran) == sorted(histories), ran
    for key, job in histories.items():
        files = [p for p in comfy.output_dir.rglob("*.mp4") if key in p.name]
        (item,) = job.done_record()["files"]
        assert len(files) == 1 and sha256_file(files[0]) == item["sha256"], (key, files)
        assert sorted(p.name for p in Path(item["path"]).parent.iterdir()) == [Path(item["path"]).name]


def test_withdraw_deletes_a_pending_prompt_and_interrupts_only_the_running_one(comfy, clip):
    """What the runner does before a job leaves a server it could not settle with (`withdraw`), on a real ComfyUI:
    a pending prompt is deleted and never runs; the running one is interrupted by its id and reported finished once
    the server no longer lists it; a prompt queued behind them is untouched and succeeds. Read back from the
    server's own /history."""
    from scripts.batch.jobs import unique_prefixes
    from scripts.batch.servers import UrlServer
    from scripts.workflow.api import apply_overrides, load_workflow

    shutil.copyfile(clip, comfy.input_dir / "withdraw_long.mp4")  # the module's 20 s clip: long enough to interrupt
    demo, _ = load_workflow(WORKFLOW)
    slow = apply_overrides(demo, {"Broadcast Load Video.video": "withdraw_long.mp4",
                                  "Broadcast Export Video.preset": "slow"})
    client = ComfyClient(comfy.url)
    assert client.watch()
    try:
        tag = f"w{time.time_ns()}"
        running = client.queue(unique_prefixes(slow, f"{tag}-running"))
        pending = client.queue(unique_prefixes(slow, f"{tag}-pending"))
        after = client.queue({"1": {"class_type": "PrimitiveString", "inputs": {"value": f"after {tag}"}},
                              "2": {"class_type": "PreviewAny", "inputs": {"source": ["1", 0]}}})
        wait_for(lambda: running in {item[1] for item in comfy.get("/queue")["queue_running"]}, 120,
                 message="the first prompt to run")
        server = UrlServer(comfy.url)
        assert server.withdraw(pending) == "unknown"
        assert server.withdraw(running) == "finished"
        assert client.wait(after, timeout=120)["status"]["status_str"] == "success"
    finally:
        client.unwatch()
    history = comfy.get("/history?max_items=10000")
    assert pending not in history
    kinds = [kind for kind, _ in history[running]["status"]["messages"]]
    assert "execution_interrupted" in kinds and "execution_success" not in kinds, kinds
    assert not list(comfy.output_dir.rglob(f"*{tag}-pending*")) and not list(comfy.output_dir.rglob(f"*{tag}-running*"))

"""Batch runner: throughput with 1 vs 2 ComfyUI servers, and the runner + ledger overhead per job against a bare
POST /prompt loop, on the same batch of demo_export jobs (the sample clip through Broadcast Export Video).

Printed side by side, one run:
- **pinned**: each server on a core of its own (sched_setaffinity before exec, so every thread inherits it); the
  1-server run uses core 0 only, the 2-server run cores 0 and 1. Servers that do not share cores should give about
  2x; what is left below that is the runner's share and the machine's other load.
- **shared**: both servers free to use every core (2 shared cores here: CPU-bound, so well under 2x).
- cores used: the servers' CPU seconds (user + system, from /proc) divided by the batch's wall time.
- overhead: the runner (prompt preparation, ledger appends with fsync, output copy with sha256, progress) against
  two bare loops that only POST each prompt (with its own prefix, so nothing is cached) and wait for it, same
  server, alternating (each repeat in another order), `--repeats` times: one polls /history (50 ms growing to
  0.5 s, as ComfyClient.wait does), one waits on the websocket for the prompt's end (the fastest a client that
  queues one prompt at a time can go). For each: wall time per job (best run); the time per job the server sat
  idle waiting for its client (wall minus the server's own execution time, from the execution_start and
  execution_success time stamps in its /history; mean of the runs); the median gap between prompts and the number
  of long ones (see PAUSE); the client process's own CPU time. Load on the machine stretches execution, and so
  the wall time, far more than the idle time.
Server start-up is outside every timing. Timings are never pass/fail.

    bash scripts/bench.sh batch [--jobs 8] [--repeats 2] [--seconds 4]
    bash scripts/bench.sh batch --quick        # 4 jobs, one repeat
    bash scripts/bench.sh batch --overhead-only --jobs 24 --repeats 3   # one server, the overhead alone
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.batch.jobs import read_batch, unique_prefixes  # noqa: E402
from scripts.batch.ledger import Ledger  # noqa: E402
from scripts.batch.progress import Progress  # noqa: E402
from scripts.batch.servers import UrlServer  # noqa: E402
from scripts.comfyui.server import ComfyServer, die_with_parent  # noqa: E402
from scripts.run_batch import BatchRunner  # noqa: E402
from scripts.run_workflow import prepare_prompt  # noqa: E402
from scripts.sample_clip import SAMPLE_NAME, make_sample_clip  # noqa: E402

WORKFLOW = ROOT / "workflows" / "api" / "demo_export.api.json"
# ComfyUI's prompt worker runs gc.collect() after a prompt at most every 10 s (main.py), holding the GIL: here about
# 0.5 s in which the server neither starts the next prompt nor answers. It falls in whichever loop runs then: the
# noise in the mean idle time. Gaps longer than this are counted (a polling client makes such gaps too), and the
# median gap is not moved by them.
PAUSE = 0.25


class Quiet(Progress):
    def event(self, message: str) -> None:
        pass


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(base: Path, cores) -> ComfyServer:
    server = ComfyServer(base)
    if cores is not None:
        server.preexec_fn = lambda: (die_with_parent(), os.sched_setaffinity(0, cores))
    return server.start()


def write_batch(folder: Path, n: int, tag: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    batch = folder / f"{tag}.jsonl"
    batch.write_text("".join(json.dumps({"name": f"{tag}-{i}", "workflow": str(WORKFLOW),
                                         "set": {"Broadcast Export Video.quality": 18 + i,
                                                 "Broadcast Export Video.filename_prefix": f"bench/{tag}"}}) + "\n"
                             for i in range(n)))
    return batch


def run_batch(servers, folder: Path, n: int, tag: str, clip: Path) -> tuple[float, float, float]:
    """The batch through the runner (servers by URL): dispatch wall seconds, the servers' CPU seconds meanwhile,
    and the once-per-batch setup (every server's /object_info, the checks, the ledger's job records)."""
    jobs = read_batch(write_batch(folder, n, tag), inputs=(clip,))
    runner = BatchRunner(jobs, [UrlServer(s.url) for s in servers], Ledger(folder / f"{tag}.ledger.jsonl"),
                         folder / f"{tag}.out", inputs=(clip,))
    runner.progress = Quiet(runner)
    runner.start_servers()  # reaches them and uploads the clip: outside the timing
    t0 = time.perf_counter()
    runner.validate()
    runner.plan()
    setup = time.perf_counter() - t0
    cpu0 = sum(cpu_seconds(s.proc.pid) for s in servers)
    own0 = time.process_time()
    t0 = time.perf_counter()
    runner.progress.begin()
    runner.go.set()
    for t in runner.threads:
        t.join()
    wall = time.perf_counter() - t0
    run_batch.own_cpu = time.process_time() - own0  # the runner's own CPU seconds while dispatching
    runner.queue.stop()
    assert all(r.state == "done" for r in runner.runs), [(r.job.name, r.state, r.error) for r in runner.runs]
    return wall, sum(cpu_seconds(s.proc.pid) for s in servers) - cpu0, setup


def bare_loop(server: ComfyServer, folder: Path, n: int, tag: str, websocket: bool = False) -> float:
    """POST /prompt and wait for each job (polling /history, or woken by the websocket), nothing else."""
    jobs = read_batch(write_batch(folder, n, tag))
    info = server.object_info()
    prompts = [unique_prefixes(prepare_prompt(j.workflow, j.overrides, info), f"{j.key}-{tag}") for j in jobs]
    if websocket and not server.watch():
        raise SystemExit(f"no websocket at {server.url}")
    bare_loop.ids = []
    try:
        own0 = time.process_time()
        t0 = time.perf_counter()
        for prompt in prompts:
            bare_loop.ids.append(server.queue(prompt))
            server.finish(bare_loop.ids[-1], 600)
        wall = time.perf_counter() - t0
        bare_loop.own_cpu = time.process_time() - own0
    finally:
        server.unwatch()
    return wall


def execution_times(server: ComfyServer, prompt_ids) -> tuple[float, list[float]]:
    """From the server's /history: its execution time of these prompts (execution_start to execution_success,
    summed) and the gaps between them (one prompt's execution_success to the next one's execution_start)."""
    spans = []
    for prompt_id in prompt_ids:
        stamps = {kind: data.get("timestamp") for kind, data in server.history(prompt_id)["status"]["messages"]}
        spans.append((stamps["execution_start"] / 1000, stamps["execution_success"] / 1000))
    return sum(end - start for start, end in spans), [b[0] - a[1] for a, b in zip(spans, spans[1:])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of the sample clip each job exports")
    ap.add_argument("--quick", action="store_true", help="4 jobs, one repeat: a smoke run")
    ap.add_argument("--overhead-only", action="store_true",
                    help="skip the 1 vs 2 servers throughput; measure the overhead on one server only")
    args = ap.parse_args()
    if args.quick:
        args.jobs, args.repeats = 4, 1
    cores = sorted(os.sched_getaffinity(0))
    print(f"machine: {os.cpu_count()} cores, {len(cores)} usable by this process; load average "
          f"{os.getloadavg()[0]:.1f}; {args.jobs} jobs of a {args.seconds:g} s 256x448 clip")
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        tmp = Path(tmp)
        clip = make_sample_clip(tmp / SAMPLE_NAME, seconds=args.seconds)
        if args.overhead_only:
            a = start_server(tmp / "overhead", None)
            try:
                run_batch([a], tmp / "warm", 1, "warm", clip)  # first-run imports and caches
                overhead(a, tmp, args, clip)
            finally:
                a.stop()
            print(f"load average at the end: {os.getloadavg()[0]:.1f}")
            return
        rows = []
        modes = [("shared", None, None)]
        if len(cores) >= 2:
            modes.insert(0, ("pinned", {cores[0]}, {cores[1]}))
        for mode, first_cores, second_cores in modes:
            a = start_server(tmp / f"{mode}-a", first_cores)
            b = start_server(tmp / f"{mode}-b", second_cores)
            try:
                run_batch([a], tmp / f"{mode}-warm", 1, "warm", clip)  # first-run imports and caches
                run_batch([b], tmp / f"{mode}-warm", 1, "warmb", clip)
                best = {1: None, 2: None}
                for r in range(args.repeats):
                    for count, servers in ((1, [a]), (2, [a, b])):
                        wall, cpu, _ = run_batch(servers, tmp / f"{mode}-{count}-{r}", args.jobs, f"{mode}{count}r{r}",
                                              clip)
                        if best[count] is None or wall < best[count][0]:
                            best[count] = (wall, cpu)
                for count in (1, 2):
                    wall, cpu = best[count]
                    rows.append((mode, count, wall, args.jobs / wall, cpu / wall))
                print(f"{mode}: 2 servers / 1 server throughput = {best[1][0] / best[2][0]:.2f}x "
                      f"(ideal 2.00x when they share no cores)")
                if mode == modes[-1][0]:
                    overhead(a, tmp, args, clip)
            finally:
                a.stop()
                b.stop()
        print(f"{'mode':<8} {'servers':>7} {'wall s':>8} {'jobs/s':>7} {'cores used':>10}")
        for mode, count, wall, rate, used in rows:
            print(f"{mode:<8} {count:>7} {wall:>8.2f} {rate:>7.3f} {used:>10.2f}")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def overhead(server: ComfyServer, tmp: Path, args, clip: Path) -> None:
    loops = {"bare, polling /history": [], "bare, websocket": [], "runner + ledger": []}
    setup = []
    names = list(loops)
    for r in range(args.repeats):  # alternating, each repeat in another order: the machine's load drifts over all
        for name in names[r % 3:] + names[:r % 3]:
            if name.startswith("bare"):
                ws = "websocket" in name
                wall = bare_loop(server, tmp / f"bare-{r}", args.jobs, f"{'ws' if ws else 'poll'}{r}", ws)
                ids, cpu = bare_loop.ids, bare_loop.own_cpu
            else:
                wall, _, once = run_batch([server], tmp / f"run-{r}", args.jobs, f"run{r}", clip)
                setup.append(once)
                ledger = Ledger(tmp / f"run-{r}" / f"run{r}.ledger.jsonl")
                ids, cpu = [rec["prompt_id"] for rec in ledger.records() if rec["state"] == "submitted"], \
                    run_batch.own_cpu
            assert len(ids) == args.jobs, (name, ids)
            execution, gaps = execution_times(server, ids)
            pauses = [g for g in gaps if g > PAUSE]
            loops[name].append({"wall": wall / args.jobs, "idle": (wall - execution) / args.jobs,
                                "pauses": len(pauses), "gaps": gaps, "cpu": cpu / args.jobs})
    rows = {}
    for name, runs in loops.items():
        rows[name] = {"wall": min(r["wall"] for r in runs),
                      "idle": statistics.mean(r["idle"] for r in runs),
                      "pauses": sum(r["pauses"] for r in runs),
                      "gap": statistics.median(g for r in runs for g in r["gaps"]),
                      "cpu": min(r["cpu"] for r in runs)}
    print(f"overhead per job, {args.repeats} x {args.jobs} jobs on one server: wall (best run); the server idle, "
          f"waiting for its client (wall minus the server's execution time, mean of the runs); the median gap from "
          f"one prompt's end to the next one's start, and the gaps over {PAUSE:g} s (the server's gc pauses, or "
          f"polling); the client process's CPU (best run)")
    print(f"  {'loop':<24} {'wall s':>7} {'idle ms':>8} {'gap ms':>7} {'long':>5} {'CPU ms':>7}")
    for name, row in rows.items():
        print(f"  {name:<24} {row['wall']:>7.3f} {row['idle'] * 1000:>8.1f} {row['gap'] * 1000:>7.1f} "
              f"{row['pauses']:>5} {row['cpu'] * 1000:>7.1f}")
    runner = rows["runner + ledger"]
    for name in ("bare, websocket", "bare, polling /history"):
        bare = rows[name]
        job = bare["wall"]
        print(f"runner vs {name}: server idle {(runner['idle'] - bare['idle']) * 1000:+.1f} ms per job "
              f"({100 * (runner['idle'] - bare['idle']) / job:+.1f} % of a job), "
              f"gap {(runner['gap'] - bare['gap']) * 1000:+.1f} ms, wall {(runner['wall'] - job) * 1000:+.1f} ms "
              f"({100 * (runner['wall'] - job) / job:+.1f} %), CPU {(runner['cpu'] - bare['cpu']) * 1000:+.1f} ms")
    print(f"once per batch: {min(setup):.2f} s (/object_info of every server, the checks, the job records)")


if __name__ == "__main__":
    main()

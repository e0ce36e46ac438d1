"""Batch runner: throughput with 1 vs 2 ComfyUI servers, and the runner + ledger overhead per job against a bare
POST /prompt loop, on the same batch of demo_export jobs (the sample clip through Broadcast Export Video).

Printed side by side, one run:
- **pinned**: each server on a core of its own (sched_setaffinity before exec, so every thread inherits it); the
  1-server run uses core 0 only, the 2-server run cores 0 and 1. Servers that do not share cores should give about
  2x; what is left below that is the runner's share and the machine's other load.
- **shared**: both servers free to use every core (2 shared cores here: CPU-bound, so well under 2x).
- cores used: the servers' CPU seconds (user + system, from /proc) divided by the batch's wall time.
- overhead: the runner (prompt preparation, ledger appends with fsync, output copy with sha256, progress) against a
  loop that only POSTs each prompt (with its own prefix, so nothing is cached) and polls /history, same server,
  alternating, best of `--repeats`: in wall time (noisy on a shared machine) and in the runner process's own CPU
  time (what the runner itself costs, whatever else runs).
Server start-up is outside every timing. Timings are never pass/fail.

    bash scripts/bench.sh batch [--jobs 8] [--repeats 2] [--seconds 4]
    bash scripts/bench.sh batch --quick        # 4 jobs, one repeat
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.batch_jobs import read_batch, unique_prefixes  # noqa: E402
from scripts.batch_ledger import Ledger  # noqa: E402
from scripts.batch_progress import Progress  # noqa: E402
from scripts.batch_servers import UrlServer  # noqa: E402
from scripts.comfy_server import ComfyServer, die_with_parent  # noqa: E402
from scripts.run_batch import BatchRunner  # noqa: E402
from scripts.run_workflow import prepare_prompt  # noqa: E402
from scripts.sample_clip import SAMPLE_NAME, make_sample_clip  # noqa: E402

WORKFLOW = ROOT / "workflows" / "api" / "demo_export.api.json"


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


def bare_loop(server: ComfyServer, folder: Path, n: int, tag: str) -> float:
    """POST /prompt and poll /history for each job, nothing else."""
    jobs = read_batch(write_batch(folder, n, tag))
    info = server.object_info()
    prompts = [unique_prefixes(prepare_prompt(j.workflow, j.overrides, info), f"{j.key}-{tag}") for j in jobs]
    own0 = time.process_time()
    t0 = time.perf_counter()
    for prompt in prompts:
        server.finish(server.queue(prompt), 600)
    bare_loop.own_cpu = time.process_time() - own0
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of the sample clip each job exports")
    ap.add_argument("--quick", action="store_true", help="4 jobs, one repeat: a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.jobs, args.repeats = 4, 1
    cores = sorted(os.sched_getaffinity(0))
    print(f"machine: {os.cpu_count()} cores, {len(cores)} usable by this process; load average "
          f"{os.getloadavg()[0]:.1f}; {args.jobs} jobs of a {args.seconds:g} s 256x448 clip")
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        tmp = Path(tmp)
        clip = make_sample_clip(tmp / SAMPLE_NAME, seconds=args.seconds)
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


def overhead(server: ComfyServer, tmp: Path, args, clip: Path) -> None:
    bare, runner, setup, bare_cpu, runner_cpu = [], [], [], [], []
    for r in range(args.repeats):
        bare.append(bare_loop(server, tmp / f"bare-{r}", args.jobs, f"bare{r}"))
        bare_cpu.append(bare_loop.own_cpu)
        wall, _, once = run_batch([server], tmp / f"run-{r}", args.jobs, f"run{r}", clip)
        runner.append(wall)
        runner_cpu.append(run_batch.own_cpu)
        setup.append(once)
    b, w = min(bare), min(runner)
    per_job = (w - b) / args.jobs
    print(f"overhead: bare POST /prompt loop {b / args.jobs:.3f} s/job, runner + ledger {w / args.jobs:.3f} s/job: "
          f"{per_job * 1000:+.0f} ms per job ({100 * per_job / (b / args.jobs):+.1f} % of a job); once per batch "
          f"{min(setup):.2f} s (/object_info of every server, the checks, job records)")
    extra_cpu = (min(runner_cpu) - min(bare_cpu)) / args.jobs
    print(f"overhead in CPU time (not disturbed by the machine's other load): the runner's process "
          f"{min(runner_cpu) / args.jobs * 1000:.0f} ms/job, "
          f"the bare loop's {min(bare_cpu) / args.jobs * 1000:.0f} ms/job: "
          f"{extra_cpu * 1000:+.0f} ms per job = {100 * extra_cpu / (b / args.jobs):+.1f} % of a job's wall time")


if __name__ == "__main__":
    main()

"""Resident memory of this process as the Linux kernel counts it (/proc/self/status), for the benchmarks' memory
figures: what a render or an export adds, measured in a fresh process per run."""
from __future__ import annotations


def status_mib(field: str) -> float:
    """A /proc/self/status field (VmRSS, VmHWM, RssAnon, ...) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS, so it covers only what follows (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False

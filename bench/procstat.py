"""Another process's own accounting, read from /proc (Linux): CPU time, resident memory, fds.

`resource.getrusage` and `os.times` only see children that have been waited for, so the daemon's
figures come from `/proc/<pid>/stat` and `/proc/<pid>/status` while it runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PROC = Path("/proc")


def available() -> bool:
    return (_PROC / "self" / "stat").exists()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of every thread of `pid` so far."""
    stat = (_PROC / str(pid) / "stat").read_text()
    # The command name may contain spaces and parentheses: split after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLOCK_TICKS


@dataclass(frozen=True)
class Memory:
    rss_kb: int
    peak_kb: int  # VmHWM: the high-water mark since start or since `reset_peak`


def memory(pid: int) -> Memory:
    values: dict[str, int] = {}
    for line in (_PROC / str(pid) / "status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0])
    return Memory(rss_kb=values.get("VmRSS", 0), peak_kb=values.get("VmHWM", 0))


def reset_peak(pid: int) -> bool:
    """Reset VmHWM to the current RSS (`clear_refs` 5); False where the kernel refuses."""
    try:
        (_PROC / str(pid) / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def machine_busy_seconds() -> float:
    """CPU time every process on the machine has used so far (all cores), from /proc/stat."""
    fields = (_PROC / "stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def open_fds(pid: int) -> int:
    return len(os.listdir(_PROC / str(pid) / "fd"))


def threads(pid: int) -> int:
    return len(os.listdir(_PROC / str(pid) / "task"))

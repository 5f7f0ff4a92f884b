"""What a process holds, from /proc (Linux; no psutil): its TCP sockets that
are not listening, by state, its resident memory, and the CPU time it and
its descendants have used."""

from __future__ import annotations

import os
import time
from pathlib import Path

# The states of /proc/net/tcp (include/net/tcp_states.h).
TCP_STATES = {
    "01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
    "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
    "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def open_tcp(pid: int) -> dict[str, int]:
    """The TCP sockets of ``pid`` other than its listening ones, counted by
    state (ESTABLISHED, CLOSE_WAIT...)."""
    inodes = _socket_inodes(pid)
    counts: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[9] not in inodes:
                continue
            state = TCP_STATES.get(fields[3], fields[3])
            if state != "LISTEN":
                counts[state] = counts.get(state, 0) + 1
    return counts


def rss_kib(pid: int) -> int:
    """The resident set size of ``pid`` (VmRSS), in KiB; 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (the first is
    field 3, the state), or None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def _cpu_ticks(fields: list[str]) -> int:
    # Fields 14-17: utime, stime (all threads), cutime, cstime (children reaped).
    return sum(int(value) for value in fields[11:15])


def cpu_seconds(pid: int) -> float:
    """The user + system CPU time of ``pid`` (all its threads), of its
    children that have ended (cutime, cstime) and of its live descendants,
    in seconds; 0.0 if it is gone. Descendants that are still running count
    too, so that work a process hands to a pool of worker processes is not
    missed (their time moves into cutime when they end and are reaped)."""
    own = _stat(pid)
    if own is None:
        return 0.0
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None and len(fields) > 14:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            ticks[int(entry.name)] = _cpu_ticks(fields)
    total = _cpu_ticks(own)
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop()
        total += ticks.get(child, 0)
        pending += children.get(child, [])
    return total / os.sysconf("SC_CLK_TCK")


def cpu_seconds_once_idle(pid: int, every: float = 0.1, timeout: float = 5.0) -> float:
    """``cpu_seconds(pid)`` once it has stopped growing (less than two clock
    ticks in ``every`` s; at most ``timeout`` s): so that work the process
    still does after its last answer (deferred to a thread, a pool...) is
    counted with the requests that caused it."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(every)
        now = cpu_seconds(pid)
        if now - last < 2 / os.sysconf("SC_CLK_TCK"):
            return now
        last = now
    return last

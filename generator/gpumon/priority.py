"""Scheduling priority of the servers gpumon starts on loopback (:mod:`gpumon.localprom`) and of
the processes that start them.

Linux shares the CPU per *scheduler autogroup* when ``/proc/sys/kernel/sched_autogroup_enabled`` is
1 (Debian's default, sched(7)): every new session (``setsid``) is a group, and a group gets one
share however many processes it runs. Every local server runs in a session of its own, so a batch
of dozens of servers counts dozens of shares against one for a process that must answer a
scrape within a second. Setting a group's nice value, as well as the process's, puts them in
proportion.
"""

from __future__ import annotations

import os
from pathlib import Path


def renice(pid: int, niceness: int) -> None:
    """Run process ``pid`` at nice value ``niceness`` (-20..19; higher yields more): its autogroup's
    (``/proc/<pid>/autogroup``, shared by its whole session: use it on a process that leads a
    session of its own) and its main thread's (threads it starts later inherit it).

    Best effort: a kernel without autogroups, a process gone or a refused write leave the
    priority as it was (without CAP_SYS_NICE a process may raise a nice value, never lower it)."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(f"{niceness}\n")
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
    except OSError:
        pass

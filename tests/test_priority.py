"""gpumon.priority: a server started in a session of its own, run at a higher nice value, both its
scheduler autogroup's (where the kernel has autogroups) and its process's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpumon.priority import renice


def test_a_server_in_its_own_session_runs_at_the_nice_value_given():
    base = os.nice(0)
    want = min(base + 7, 19)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    own = Path("/proc/self/autogroup")
    before = own.read_text() if own.exists() else ""
    try:
        renice(proc.pid, want)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == want
        group = Path(f"/proc/{proc.pid}/autogroup")
        if group.exists():  # a kernel built with autogroups: the session's group yields too
            assert group.read_text().split()[-1] == str(want), group.read_text()
            # ... and only that session's: this process's group is as it was
            assert own.read_text() == before
    finally:
        proc.kill()
        proc.wait()


def test_a_process_gone_is_left_alone():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    renice(proc.pid, 10)  # no error: best effort

"""Servers left behind by a pywebbench that was killed: found again and stopped on --resume."""

from __future__ import annotations

import os
import signal
from datetime import datetime

import psutil

from pywebbench.store import Replicate, StackRow


def reap_orphan(rep: Replicate, stack: StackRow | None) -> bool:
    """Stop the server of a replicate left "running" by a pywebbench that was killed.

    Only a process that is still the one recorded: same pid, started before the replicate
    row, leading its own process group, and running from the stack's virtualenv. Returns
    True when a process group was stopped.
    """
    if not rep.pid or stack is None or not stack.env_key:
        return False
    try:
        proc = psutil.Process(rep.pid)
        started = datetime.fromisoformat(rep.started_at).timestamp()
        if proc.create_time() > started + 1 or os.getpgid(rep.pid) != rep.pid:
            return False
        if not any(stack.env_key in part for part in [*proc.cmdline(), proc.exe()]):
            return False
        os.killpg(rep.pid, signal.SIGKILL)
    except (psutil.Error, OSError, ValueError):
        return False
    return True

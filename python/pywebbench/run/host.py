"""Facts about the host a study runs on, and the split of cores between server and generator."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import psutil

from pywebbench.meter.pypy_gc import cpuinfo_text, reported_caches


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform's guess)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def governor(cpu: int = 0) -> str | None:
    """The CPU frequency governor of ``cpu``, or None when the kernel exposes none (VMs)."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def os_name() -> str:
    """``PRETTY_NAME`` of /etc/os-release, else ``platform.platform()``."""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def usable_cpus() -> list[int]:
    """Cores this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def split_cpus(server: list[int], generator: list[int]) -> tuple[list[int], list[int]]:
    """Default core split: server on the first usable core, generator on the others.

    On a single core both share it (recorded as such: the numbers are then indicative only).
    """
    cpus = usable_cpus()
    server = list(server) or cpus[:1]
    generator = list(generator) or [c for c in cpus if c not in server] or list(server)
    bad = [c for c in server + generator if c not in cpus]
    if bad:
        raise ValueError(f"cpus: core(s) {sorted(set(bad))} not usable here (usable: {cpus})")
    return server, generator


def facts() -> dict[str, Any]:
    """Everything recorded in the ``runs`` row about the host."""
    try:
        load = list(os.getloadavg())
    except OSError:
        load = []
    somaxconn = None
    try:
        somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        pass
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count() or 1,
        "kernel": platform.release(),
        "governor": governor(),
        "memory_bytes": int(psutil.virtual_memory().total),
        "os": os_name(),
        "extra": {
            "loadavg": load,
            "somaxconn": somaxconn,
            "usable_cpus": usable_cpus(),
            # what the CPU reports (PyPy sizes its nursery from it: meter/pypy_gc.py)
            "cpu_cache_bytes": reported_caches(cpuinfo_text()),
        },
    }


def git_revision(directory: Path) -> dict[str, Any] | None:
    """The commit checked out in ``directory`` and whether tracked files have changed since
    (``{"revision": sha, "dirty": bool}``), or None when it is not a git checkout (or git
    is not installed)."""

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    revision = git("rev-parse", "HEAD")
    if not revision:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"revision": revision, "dirty": bool(status)}

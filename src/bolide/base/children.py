"""Child processes that never outlive their parent, and a last-resort stop of every child.

A parent that starts a ``bolide`` child gives it :func:`child_environment`; the child calls
:func:`die_with_parent` first thing (``bolide``'s entry point does). On Linux the child asks the
kernel for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``), then checks that the
parent did not die before the request; elsewhere a daemon thread watches ``os.getppid()`` every
``CHILD_PARENT_WATCH_INTERVAL_MS`` and sends the same SIGTERM. Either way the child stops as on
a user's SIGTERM (brokers close their store), so a SIGKILLed ``bolide bench`` leaves no broker.

The variable names the parent's pid and is removed from the child's environment as soon as
it is read: a grandchild does not inherit a parent that is not its own.

:func:`kill_children` is the bound's end for a parent that was signalled and could not stop
its children in time: SIGKILL, by pid, to every live child (read from ``/proc``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from bolide.base import limits

__all__ = [
    "PARENT_PID_VARIABLE",
    "child_environment",
    "child_pids",
    "die_with_parent",
    "kill_children",
]

PARENT_PID_VARIABLE = "BOLIDE_DIE_WITH_PARENT_PID"
"""Environment variable: the pid whose death stops this process (set by the parent)."""
_PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal this process gets when the thread that forked it ends."""


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus :data:`PARENT_PID_VARIABLE` naming
    this process: give it to a ``bolide`` child so that it stops when this process dies."""
    environment = dict(os.environ if base is None else base)
    environment[PARENT_PID_VARIABLE] = str(os.getpid())
    return environment


def die_with_parent() -> str:
    """When the environment names a parent, arrange a SIGTERM to this process when it dies.

    Returns how: ``"prctl"`` (Linux), ``"watchdog"`` (a thread polling the parent pid),
    ``"parent already gone"`` (SIGTERM sent now) or ``""`` (no parent named: nothing done).
    A malformed variable is ignored (it is removed either way).
    """
    text = os.environ.pop(PARENT_PID_VARIABLE, "")
    if not text.isdigit():
        return ""
    parent_pid = int(text)
    how = "prctl" if _request_death_signal() else "watchdog"
    if os.getppid() != parent_pid:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)
        return "parent already gone"
    if how == "watchdog":
        threading.Thread(
            target=_watch_parent, args=(parent_pid,), name="bolide-parent-watch", daemon=True
        ).start()
    return how


def _request_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    library = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(library, use_errno=True)
    except OSError:
        return False
    return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)) == 0


def _watch_parent(parent_pid: int) -> None:
    interval_s = limits.CHILD_PARENT_WATCH_INTERVAL_MS / 1000
    stopped = threading.Event()
    while not stopped.wait(interval_s):
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)
            return


def child_pids(parent_pid: int | None = None) -> list[int]:
    """Live children of ``parent_pid`` (default: this process), from ``/proc`` (Linux; an
    empty list elsewhere)."""
    parent = os.getpid() if parent_pid is None else parent_pid
    found: list[int] = []
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                text = (entry / "stat").read_text()
            except OSError:  # it ended between the listing and the read
                continue
            fields = text[text.rindex(")") + 2 :].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def kill_children() -> list[int]:
    """SIGKILL every live child of this process (by pid); returns the pids signalled."""
    killed: list[int] = []
    for pid in child_pids():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed

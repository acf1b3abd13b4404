"""Keeping the garbage collector's full passes short in a server process.

CPython's cyclic collector walks every tracked object of the generation it collects; a full
(generation 2) pass walks all of them. A started broker holds tens of thousands of objects
that live as long as the process (modules, classes, functions, configuration, the route and
topic tables): measured in the broker under `bench/delay.py --flush sync`, full passes took
25–105 ms of loop time (9–12 ms of CPU at start, 27 ms once 10,000 timers were pending), and
every delivery due meanwhile is late by that much.

:func:`freeze_started_process` runs once, when a server process has started (the CLI's ready
line): one full collection, then ``gc.freeze()`` moves every surviving object into the
permanent generation, which later passes skip (the practice CPython documents for
long-running servers). Objects made afterwards are collected as before. Only dedicated server
processes call it, never a library user's process (tests start brokers in-process).
"""

from __future__ import annotations

import gc

__all__ = ["freeze_started_process"]


def freeze_started_process() -> int:
    """Collect once, then exempt every live object from later passes; returns how many
    objects the permanent generation now holds."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()

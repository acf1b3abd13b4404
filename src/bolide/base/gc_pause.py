"""Keeping the cyclic garbage collector's full collections out of a server's latency.

CPython's collector scans every tracked object of a generation. A started broker holds about
70,000 of them — modules, functions, classes, configuration — that live as long as the
process; a full (generation 2) collection walks them all and stops the event loop for 5-10 ms
on this machine (40-80 ms under load), which is a whole e2e p999 of its own. They never become
garbage, so scanning them is wasted: :func:`freeze_startup_objects`, called once the process
has started serving, collects once and then moves everything alive into the collector's
permanent generation (:func:`gc.freeze`), which later collections skip. Objects made afterwards
(connections, messages, parked pulls) are collected as before; the young generations, where
almost all of them die, cost what they cost without it.

Only processes whose startup is done call it (the servers' ready line, ``bolide bench`` before
its timed phase): a library never changes the collector of the process it runs in.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_objects"]


def freeze_startup_objects() -> int:
    """Collect the garbage of the startup, then freeze what survives; returns how many
    objects the permanent generation holds now."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()

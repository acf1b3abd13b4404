"""The event loop Bolide runs on: uvloop when it is importable, asyncio's default otherwise.

uvloop roughly doubles small-frame throughput (DESIGN §9); everything in Bolide also runs on
the default loop, which tests may keep using.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Coroutine
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


def _uvloop() -> ModuleType | None:
    try:
        return importlib.import_module("uvloop")
    except ImportError:
        return None


def uvloop_available() -> bool:
    """True when uvloop can be imported on this interpreter."""
    return _uvloop() is not None


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new uvloop loop when uvloop is installed, else a new default asyncio loop."""
    uvloop = _uvloop()
    if uvloop is None:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def install_event_loop_policy() -> bool:
    """Make uvloop the process-wide loop policy when it is installed.

    Returns True when uvloop was installed, False when the default policy stays. Meant for
    entry points (the command line); library code never changes the global policy.
    """
    uvloop = _uvloop()
    if uvloop is None:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh loop from :func:`new_event_loop`, then close it."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)

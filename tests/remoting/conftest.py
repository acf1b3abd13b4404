"""Every async remoting test runs twice: on asyncio's default loop and on uvloop (production)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from bolide.remoting import loop as remoting_loop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    factories: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
        "asyncio": asyncio.new_event_loop
    }
    if remoting_loop.uvloop_available():
        factories["uvloop"] = remoting_loop.new_event_loop
    return factories

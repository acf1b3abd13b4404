"""Listener shapes: one or two arguments, plain or async, functions or callable objects."""

from __future__ import annotations

import asyncio
import functools

import pytest

from bolide.client.consumer.listener import ConsumeContext, ConsumeResult, adapt_listener
from bolide.protocol.message import MessageExt

CONTEXT = ConsumeContext("T", "b", 0, 0)


def one(messages: list[MessageExt]) -> ConsumeResult:
    return ConsumeResult.SUCCESS


def two(messages: list[MessageExt], context: ConsumeContext) -> ConsumeResult:
    context.ack_index = -1
    return ConsumeResult.SUCCESS


async def one_async(messages: list[MessageExt]) -> ConsumeResult:
    return ConsumeResult.RECONSUME_LATER


class AsyncObject:
    async def __call__(self, messages: list[MessageExt], context: ConsumeContext) -> ConsumeResult:
        return ConsumeResult.SUCCESS


def test_one_argument_listener_ignores_the_context() -> None:
    adapted = adapt_listener(one)
    assert not adapted.is_async
    assert adapted.call([], CONTEXT) is ConsumeResult.SUCCESS


def test_two_argument_listener_gets_the_context() -> None:
    context = ConsumeContext("T", "b", 0, 3)
    assert adapt_listener(two).call([], context) is ConsumeResult.SUCCESS
    assert context.ack_index == -1


def test_async_functions_and_objects_are_detected() -> None:
    adapted = adapt_listener(one_async)
    assert adapted.is_async
    assert asyncio.run(adapted.call([], CONTEXT)) is ConsumeResult.RECONSUME_LATER
    assert adapt_listener(AsyncObject()).is_async
    assert not adapt_listener(lambda messages: ConsumeResult.SUCCESS).is_async
    assert not adapt_listener(functools.partial(two)).is_async


def test_wrong_shapes_are_refused() -> None:
    with pytest.raises(TypeError):
        adapt_listener(lambda: ConsumeResult.SUCCESS)
    with pytest.raises(TypeError):
        adapt_listener(42)  # type: ignore[arg-type]

"""The proxy's receive path over real gRPC (issue 29): filter expressions checked as Apache's
proxy checks them before a POP reaches a broker."""

from __future__ import annotations

from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from tests.proxy.test_service import Proxy, _receive_request
from tests.proxy.test_service import proxy as proxy  # the fixture

__all__ = ["proxy"]


async def test_an_empty_sql92_expression_is_an_illegal_filter_expression(proxy: Proxy) -> None:
    request = _receive_request("Plain", "G", 10_000)
    request.filter_expression.type = pb.SQL
    request.filter_expression.expression = "  "
    answers = await proxy.receive(request)
    assert answers[0].status.code == pb.ILLEGAL_FILTER_EXPRESSION


async def test_a_sql92_receive_needs_property_filters_on_the_broker(proxy: Proxy) -> None:
    """The test broker runs with enablePropertyFilter=false: the broker's refusal reaches the
    client as INTERNAL_SERVER_ERROR with its remark, as from Apache's proxy."""
    request = _receive_request("Plain", "G", 10_000)
    request.filter_expression.type = pb.SQL
    request.filter_expression.expression = "a > 1"
    answers: list[spb.ReceiveMessageResponse] = await proxy.receive(request)
    assert answers[0].status.code == pb.INTERNAL_SERVER_ERROR
    assert "enablePropertyFilter=true" in answers[0].status.message

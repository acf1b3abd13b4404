"""The message trace page: a message's life read from the trace topic (as ``bolide message
trace`` reads it), as a timeline picture (:mod:`.trace_svg`) and a table of the steps."""

from __future__ import annotations

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bolide.base.errors import TopicNotFoundError
from bolide.client.admin.trace import format_duration_ms, message_trace
from bolide.dashboard.auth import Session
from bolide.dashboard.data import PageError
from bolide.dashboard.rendering import Dashboard, page, query_text, required_query_text
from bolide.dashboard.trace_svg import trace_svg
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC

__all__ = ["trace_routes"]


def trace_routes() -> list[Route]:
    return [Route("/messages/trace", page(trace_page))]


async def trace_page(dashboard: Dashboard, request: Request, session: Session) -> Response:
    msg_id = required_query_text(request, "id", "Which message? Give its id.")
    trace_topic = query_text(request, "trace_topic") or DEFAULT_TRACE_TOPIC
    try:
        found = await message_trace(dashboard.admin, msg_id, trace_topic)
    except TopicNotFoundError as error:
        raise PageError(404, f"No trace topic {trace_topic}: {error}") from error
    first_ms = found.steps[0].record.timestamp_ms if found.steps else 0
    rows = [
        {
            "type": str(step.record.type),
            "time_ms": step.record.timestamp_ms,
            "after": (
                f"+{format_duration_ms(step.record.timestamp_ms - first_ms)}"
                if step.record.timestamp_ms > 0
                else "-"
            ),
            "group": step.record.group,
            "client": step.client,
            "status": step.status,
            "detail": step.detail,
        }
        for step in found.steps
    ]
    return dashboard.render(
        request,
        session,
        "trace.html",
        msg_id=msg_id,
        trace_topic=trace_topic,
        timeline=Markup(trace_svg(found)),  # every text inside is escaped (trace_svg)
        steps=rows,
        undecodable=found.undecodable,
    )

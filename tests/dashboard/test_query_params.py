"""The pages' query-parameter readers (dashboard/rendering.py)."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from bolide.dashboard.data import PageError
from bolide.dashboard.rendering import query_text, required_query_text


def _request(query_string: bytes) -> Request:
    scope = {"type": "http", "method": "GET", "path": "/message", "query_string": query_string,
             "headers": []}  # fmt: skip
    return Request(scope)


def test_query_text_is_stripped_and_empty_when_absent() -> None:
    request = _request(b"id=%20AC1E0001%20&topic=")
    assert query_text(request, "id") == "AC1E0001"
    assert query_text(request, "topic") == ""
    assert query_text(request, "group") == ""


@pytest.mark.parametrize("query_string", [b"", b"id=", b"id=%20%20"])
def test_a_missing_or_blank_required_parameter_is_a_400_with_the_question(
    query_string: bytes,
) -> None:
    with pytest.raises(PageError) as caught:
        required_query_text(_request(query_string), "id", "Which message? Give its id.")
    assert (caught.value.status, caught.value.message) == (400, "Which message? Give its id.")


def test_a_required_parameter_is_returned_stripped() -> None:
    assert required_query_text(_request(b"group=%20g1"), "group", "Which group?") == "g1"

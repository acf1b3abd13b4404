"""Fuzz the web dashboard's HTTP listener (issue 30; the requests: bench/fuzz_http.py).

Every route of the dashboard (pages, forms that change state, the JSON endpoints, static
files), with a real session cookie and CSRF token from a page and the real form field names,
mutated; long and invalid URLs; raw garbage and slow or cut writes. The liveness check is the
cluster page answered 200.

    .venv/bin/python bench/fuzz_dashboard.py [--seconds 60] [--seed 1] [--requests N]
"""

from __future__ import annotations

import random
import re
import sys

from bench.fuzz_http import HttpTarget, http_attack, http_get, status_of
from bench.fuzz_support import Fuzzer, ServerUnderTest, main
from bolide.client.admin import AdminClient
from bolide.protocol.bodies import SubscriptionGroupConfig

__all__ = ["FUZZER", "attack", "liveness", "prepare"]

TOPIC, GROUP = "FuzzHttp", "FuzzHttpGroup"
PATHS = (
    "/", "/api/cluster", f"/api/groups/{GROUP}", "/delay", "/dlq", "/dlq/export", "/dlq/resend",
    "/groups", f"/groups/{GROUP}", f"/groups/{GROUP}/clone", f"/groups/{GROUP}/reset",
    f"/groups/{GROUP}/reset/confirm", "/login", "/logout", "/messages", "/messages/consume",
    "/messages/view", "/producers", "/topics", "/topics/create", f"/topics/{TOPIC}",
    f"/topics/{TOPIC}/delete", f"/topics/{TOPIC}/send", f"/topics/{TOPIC}/update",
    "/static/", "/static/app.css", "/nope",
)  # fmt: skip
FIELDS = (
    "access_key", "begin", "body", "client_id", "confirm", "end", "group", "id", "key", "keys",
    "mode", "msg_id", "next", "offset", "order", "perm", "q", "queue", "queues", "read_queues",
    "secret_key", "show", "tags", "target", "time", "timestamp_ms", "topic", "write_queues",
)  # fmt: skip
_target = HttpTarget("dashboard", PATHS, FIELDS)
_COOKIE = re.compile(rb"set-cookie: (bolide_session=[^;\r\n]+)", re.IGNORECASE)
_CSRF = re.compile(rb'name="csrf" value="([^"]+)"')


async def prepare(server: ServerUnderTest) -> None:
    """A topic and a group to name in paths, and a real session cookie and CSRF token."""
    async with AdminClient(server.listeners["namesrv"]) as admin:
        await admin.create_topic(TOPIC, queue_count=2)
        await admin.create_group(SubscriptionGroupConfig(GROUP))
    page = await http_get(server, "dashboard", "/topics")
    cookie = _COOKIE.search(page)
    _target.cookie = cookie.group(1).decode() if cookie else ""
    if _target.cookie:
        page = await http_get(server, "dashboard", "/topics", f"Cookie: {_target.cookie}\r\n")
    csrf = _CSRF.search(page)
    _target.csrf = csrf.group(1).decode() if csrf else ""


async def attack(server: ServerUnderTest, rng: random.Random, budget: int) -> int:
    return await http_attack(_target, server, rng, budget)


async def liveness(server: ServerUnderTest) -> bool:
    return status_of(await http_get(server, "dashboard", "/")) == 200


FUZZER = Fuzzer("dashboard", attack, liveness, prepare)
"""What ``python bench/fuzz_dashboard.py`` and tests/fuzz/ run."""

if __name__ == "__main__":
    sys.exit(main(FUZZER))

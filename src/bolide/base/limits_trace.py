"""Bounds of message trace: the broker's trace service and the client's trace dispatcher.

Re-exported by bolide.base.limits (import them from there); the unit-suffix test scans them
through it. Each bound has its unit last in its name and the reason for its value.
"""

from __future__ import annotations

TRACE_MESSAGE_MAX_BYTES = 128_000
"""Body bytes of one trace message at most: the Java trace dispatcher's maxMsgSize, so stock
readers of the trace topic never meet a larger one."""
TRACE_MESSAGE_MAX_RECORDS = 100
"""Records one trace message holds at most: bounds its KEYS (one msgId or more per record), so
the index keeps every key of it."""
TRACE_BROKER_INTERVAL_MS = 1_000
"""How often the broker's trace service turns what it noted into records and writes them
(Java's client dispatcher flushes every 5 s; the broker's records should show sooner)."""
TRACE_BROKER_STEP_MAX_MESSAGES = 4_096
"""Stored messages one step of the broker's trace service reads back at most (the rest wait
for the next step): bounds the time a step holds the event loop."""
TRACE_BROKER_PENDING_MAX_ENTRIES = 100_000
"""Deliveries the broker's trace keeps open waiting for their commit, send-back or dead
letter; the oldest are closed without a result beyond (about 200 bytes each)."""
TRACE_BROKER_NOTED_MAX_EVENTS = 100_000
"""Deliveries and commits noted between two steps at most: beyond, new ones are counted as
dropped, never held (the notes cost the pull and commit paths one append)."""
TRACE_CLIENT_BATCH_CONTEXTS = 20
"""A client's trace sends what it gathered once this many sends or consume calls added records
(the Java dispatcher's batchNum cap)."""
TRACE_CLIENT_FLUSH_INTERVAL_MS = 5_000
"""... or after this long, whichever comes first (the Java dispatcher's 5 s)."""

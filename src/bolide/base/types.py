"""Names for the strings and numbers that travel everywhere, so signatures say what they carry."""

from __future__ import annotations

from typing import NewType

Topic = NewType("Topic", str)
Group = NewType("Group", str)
ClientId = NewType("ClientId", str)
BrokerName = NewType("BrokerName", str)
ClusterName = NewType("ClusterName", str)
Address = NewType("Address", str)
"""``host:port``."""
QueueId = NewType("QueueId", int)
QueueOffset = NewType("QueueOffset", int)
"""Logical offset of a message in its consume queue."""
CommitLogOffset = NewType("CommitLogOffset", int)
"""Physical offset of a record in the commit log."""

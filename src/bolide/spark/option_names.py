"""The option names the data source knows, and the check that refuses every other one.

Spark lower-cases option keys before handing them over, so names are compared lower-cased.
A name the source or sink does not know is refused by name (a typo would otherwise run the
query on a default without a word), with the closest known names and, for the options of
Spark's Kafka connector that have a Bolide equivalent, what to use instead. Pure: no I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from bolide.base.errors import ConfigError

__all__ = ["READ_OPTION_NAMES", "WRITE_OPTION_NAMES", "check_option_names"]

_COMMON = (
    "namesrv",
    "namesrvAddr",
    "group",
    "accessKey",
    "secretKey",
    "tls",
    "tlsTrustCertPath",
    "tlsVerifyServer",
)

_SPARK_OWN = ("checkpointLocation", "queryName")
"""Set by Spark itself from ``option(...)`` / ``queryName(...)``: the query's, not ours."""

READ_OPTION_NAMES = frozenset(
    (
        *_COMMON,
        *_SPARK_OWN,
        "topic",
        "topics",
        "subscribe",
        "subscribePattern",
        "tags",
        "startingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsets",
        "endingOffsetsByTimestamp",
        "maxMessagesPerTrigger",
        "maxOffsetsPerTrigger",
        "minMessagesPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "maxRecordsPerPartition",
        "pullBatchSize",
        "failOnDataLoss",
        "consumeMode",
        "invisibleTime",
    )
)
"""Every option of ``spark.read`` / ``spark.readStream`` (docs/spark.md, Reading)."""

WRITE_OPTION_NAMES = frozenset(
    (*_COMMON, *_SPARK_OWN, "topic", "sendTimeoutMs", "exactlyOnce"),
)
"""Every option of ``df.write`` / ``df.writeStream`` (docs/spark.md, Writing)."""

_HINTS = {
    "path": "name the topic with the topic option, not a path (load(...)/save(...)/start(...))",
    "includeheaders": "every message property is already in the properties column",
    "kafka.bootstrap.servers": "use namesrv (host:port of a name server)",
    "assign": "use topic, with startingOffsets JSON for the queues",
    "groupidprefix": "use group",
    "kafka.group.id": "use group",
}


def check_option_names(options: Iterable[str], known: frozenset[str], what: str) -> None:
    """Raise ConfigError naming every option of ``options`` (names in any case) that is not in
    ``known``; ``what`` says whose options they are (``"the bolide source"``)."""
    lowered = {name.lower(): name for name in known}
    unknown = sorted({name for name in options if name.lower() not in lowered})
    if not unknown:
        return
    remarks: list[str] = []
    for name in unknown:
        hint = _HINTS.get(name.lower())
        if not hint:
            close = difflib.get_close_matches(name.lower(), list(lowered), n=2, cutoff=0.75)
            hint = "did you mean " + " or ".join(lowered[item] for item in close) if close else ""
        remarks.append(f"{name} ({hint})" if hint else name)
    raise ConfigError(
        f"{what} does not know the option(s) {', '.join(remarks)}; the options are listed in"
        " docs/spark.md"
    )

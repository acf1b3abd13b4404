"""Options checked by name on the source and the sink: an unknown option or a bad value is
refused with its name (pure checks first, then through Spark: at load() for a read, when the
query starts for a streaming write)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import SparkSession

from bolide.base.errors import ConfigError
from bolide.spark.options import parse_read_options, parse_write_options
from tests.spark.conftest import WAIT_S, BackgroundCluster

BASE = {"namesrv": "h:1", "topic": "t"}


def test_the_sink_refuses_an_unknown_option_by_name() -> None:
    with pytest.raises(ConfigError, match=r"sink does not know .*topik \(did you mean topic"):
        parse_write_options({"namesrv": "h:1", "topik": "t"})
    with pytest.raises(ConfigError, match=r"maxMessagesPerTrigger"):
        parse_write_options({**BASE, "maxMessagesPerTrigger": "5"})


def test_the_source_refuses_an_unknown_option_and_hints_kafka_equivalents() -> None:
    with pytest.raises(ConfigError, match=r"includeHeaders \(every message property"):
        parse_read_options({**BASE, "includeHeaders": "true"}, streaming=True)
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers \(use namesrv"):
        parse_read_options({**BASE, "kafka.bootstrap.servers": "h:9092"}, streaming=False)
    with pytest.raises(ConfigError, match=r"path \(name the topic"):
        parse_read_options({**BASE, "path": "/x"}, streaming=False)


def test_spark_own_options_and_any_case_are_accepted() -> None:
    # Spark lower-cases keys and adds checkpointLocation / queryName to the sink's options.
    options = parse_write_options(
        {"namesrv": "h:1", "topic": "t", "checkpointlocation": "/c", "queryname": "q",
         "exactlyonce": "false", "SENDTIMEOUTMS": "50"}
    )  # fmt: skip
    assert options.send_timeout_ms == 50 and options.exactly_once is False
    parse_read_options(
        {**BASE, "checkpointLocation": "/c", "STARTINGOFFSETS": "latest"}, streaming=True
    )


def test_a_bad_boolean_names_the_option_and_the_accepted_values() -> None:
    with pytest.raises(ConfigError, match=r"option exactlyOnce must be true or false .*'maybe'"):
        parse_write_options({**BASE, "exactlyOnce": "maybe"})
    assert parse_write_options({**BASE, "exactlyOnce": "TRUE"}).exactly_once is True


def test_through_spark_a_bad_sink_option_stops_the_query_at_start(
    spark: SparkSession, cluster: BackgroundCluster, tmp_path: Path
) -> None:
    cluster.create_topic("names", 1)
    stream = (
        spark.readStream.format("bolide")
        .option("namesrv", cluster.namesrv_address)
        .option("topic", "names")
        .load()
    )
    for option, value, expected in (
        ("exactlyOnce", "maybe", "option exactlyOnce must be true or false"),
        ("sendTimeout", "5", "does not know the option(s) sendtimeout"),
    ):
        query = (
            stream.select("body")
            .writeStream.format("bolide")
            .option("namesrv", cluster.namesrv_address)
            .option("topic", "names-out")
            .option(option, value)
            .option("checkpointLocation", str(tmp_path / option))
            .start()
        )
        try:
            with pytest.raises(StreamingQueryException, match=re.escape(expected)):
                query.awaitTermination(int(WAIT_S))
        finally:
            query.stop()


def test_through_spark_a_bad_source_option_fails_the_read(
    spark: SparkSession, cluster: BackgroundCluster
) -> None:
    cluster.create_topic("names", 1)
    with pytest.raises(PySparkException, match=r"know the option\(s\) maxoffsetpertrigger"):
        (
            spark.read.format("bolide")
            .option("namesrv", cluster.namesrv_address)
            .option("topic", "names")
            .option("maxOffsetPerTrigger", "10")
            .load()
            .collect()
        )

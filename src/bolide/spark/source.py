"""``BolideDataSource``: the PySpark data source registered under the short name ``bolide``.

::

    spark.dataSource.register(BolideDataSource)
    stream = (spark.readStream.format("bolide")
              .option("namesrv", "127.0.0.1:9876").option("topic", "orders").load())

See docs/spark.md for the options, the schema and the delivery guarantees.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from bolide.base.errors import ConfigError
from bolide.spark.options import WriteOptions, parse_read_options, parse_write_options
from bolide.spark.pop_source import BolidePopStreamReader
from bolide.spark.reader import BolideBatchReader, BolideStreamReader
from bolide.spark.writer import BolideBatchWriter, BolideStreamWriter

__all__ = ["SOURCE_SCHEMA", "BolideDataSource"]

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("broker_name", StringType()),
        StructField("queue_id", IntegerType()),
        StructField("queue_offset", LongType()),
        StructField("msg_id", StringType()),
        StructField("keys", StringType()),
        StructField("tags", StringType()),
        StructField("body", BinaryType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("born_timestamp", TimestampType()),
        StructField("store_timestamp", TimestampType()),
        StructField("reconsume_times", IntegerType()),
        StructField("body_error", StringType()),
    ]
)
"""The rows a read produces (bolide.spark.records.SPARK_SCHEMA_DDL, as a StructType so that no
JVM is needed to parse it)."""


def _check_read_schema(schema: StructType) -> None:
    if schema.simpleString() != SOURCE_SCHEMA.simpleString():
        raise ConfigError(
            "the bolide source has a fixed schema; drop .schema(...) or use exactly "
            + SOURCE_SCHEMA.simpleString()
        )


def _write_options(raw: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    options = parse_write_options(raw)
    if options.exactly_once and not streaming:
        raise ConfigError(
            "option exactlyOnce=true applies to writeStream only (a batch write is a single"
            " job: write to a fresh topic, or drop the option)"
        )
    return options


class BolideDataSource(DataSource):
    """Read Bolide topics (batch and streaming) and write DataFrames to them.

    Options arrive as strings (keys in any case); they are checked when Spark asks for a
    reader or writer, which raises ConfigError for a missing or malformed option.
    """

    @classmethod
    def name(cls) -> str:
        return "bolide"

    def schema(self) -> StructType:
        """The fixed schema. Spark asks for it at ``load()``, which is the time to refuse
        bad read options (streaming-only checks follow when the query starts)."""
        parse_read_options(self.options, streaming=False)
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_read_schema(schema)
        options = parse_read_options(self.options, streaming=False)
        if options.consume_mode == "pop":
            raise ConfigError("consumeMode=pop applies to readStream only")
        return BolideBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        _check_read_schema(schema)
        options = parse_read_options(self.options, streaming=True)
        if options.consume_mode == "pop":
            return BolidePopStreamReader(options)
        return BolideStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Raises ConfigError for mode("overwrite"): messages are only ever appended."""
        if overwrite:
            raise ConfigError('a Bolide topic can only be appended to: use mode("append")')
        return BolideBatchWriter(_write_options(self.options, streaming=False), schema)

    def streamWriter(  # noqa: N802
        self, schema: StructType, overwrite: bool
    ) -> DataSourceStreamWriter:
        del overwrite  # complete output mode sends the whole result again, as Kafka's sink does
        return BolideStreamWriter(_write_options(self.options, streaming=True), schema)

"""PySpark data source for Bolide topics (needs the ``spark`` extra: pyspark >= 4, pyarrow).

::

    from bolide.spark import BolideDataSource
    spark.dataSource.register(BolideDataSource)
    spark.readStream.format("bolide").option("namesrv", "127.0.0.1:9876").option("topic", "t")

``BolideDataSource`` is imported on first use, so ``import bolide.spark`` alone does not load
pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bolide.spark.source import BolideDataSource

__all__ = ["BolideDataSource"]


def __getattr__(name: str) -> Any:
    if name == "BolideDataSource":
        from bolide.spark.source import BolideDataSource

        return BolideDataSource
    raise AttributeError(f"module 'bolide.spark' has no attribute {name!r}")

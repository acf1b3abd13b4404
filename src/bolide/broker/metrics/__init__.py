"""The broker's statistics and its Prometheus endpoint.

* :mod:`.stats_items` — RocketMQ's stats cells (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...) with
  minute/hour/day windows, for VIEW_BROKER_STATS_DATA (315) and the TPS figures;
* :mod:`.runtime` — GET_BROKER_RUNTIME_INFO's table and the ``rocketmq_brokeruntime_*``
  gauges from one computation;
* :mod:`.figures` — per topic and per (topic, group) figures computed at scrape time;
* :mod:`.collector`, :mod:`.otel` — the Prometheus families (rocketmq-exporter's names,
  RocketMQ 5's names, Bolide's own);
* :mod:`.server` — ``/metrics`` over HTTP on the broker's loop.

:class:`~.exporter.BrokerMetrics` ties them to one broker. This package's ``__init__``
imports nothing: :mod:`bolide.broker.stats` reads :mod:`.stats_items` without the rest.
"""

"""Broker-side message trace in RocketMQ's 4.x record format (see :mod:`.recorder`)."""

from bolide.broker.trace.recorder import BrokerTrace

__all__ = ["BrokerTrace"]

"""Bolide: a message queue in Python that speaks the Apache RocketMQ 4.x wire protocol."""

__version__ = "0.1.0"

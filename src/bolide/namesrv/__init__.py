"""The name server: route tables for topics, brokers and clusters."""

from bolide.namesrv.namesrv import NameServer

__all__ = ["NameServer"]

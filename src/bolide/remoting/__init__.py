"""asyncio transport over the protocol: connections, server, client pool, dispatcher."""

from bolide.remoting.client_pool import ClientPool
from bolide.remoting.connection import Connection, ConnectionSettings
from bolide.remoting.dispatcher import Dispatcher, Handler, RequestError
from bolide.remoting.server import RemotingServer, SocketServer, listening_socket

__all__ = [
    "ClientPool",
    "Connection",
    "ConnectionSettings",
    "Dispatcher",
    "Handler",
    "RemotingServer",
    "RequestError",
    "SocketServer",
    "listening_socket",
]

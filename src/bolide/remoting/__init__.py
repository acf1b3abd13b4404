"""asyncio transport over the protocol: connections, server, client pool, dispatcher."""

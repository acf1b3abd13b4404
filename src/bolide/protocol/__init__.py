"""Sans-IO RocketMQ remoting wire format: frames, commands, headers, bodies, message records."""

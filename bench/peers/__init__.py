"""Bolide against Redis Streams, NATS JetStream and RabbitMQ: workloads, servers, results."""

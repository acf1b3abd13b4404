"""Brokers in RocketMQ 5.x controller mode (docs/replication.md): no fixed role or id; the
controller assigns both, and the broker follows (:mod:`.replicas_manager`)."""

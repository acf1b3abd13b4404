"""The 5.x controller (RocketMQ controller mode, round3-facts §1): elects a master per broker
set from its in-sync replicas and fences the old one. Its state lives in etcd v3 only
(:mod:`.etcd_store`); every copy is stateless but for its in-memory heartbeat table."""

"""The RocketMQ client machinery: instance, producer, consumers, admin."""

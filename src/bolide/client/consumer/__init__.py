"""Push and pull consumers, rebalance, process queues, offset stores."""

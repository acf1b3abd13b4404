"""The broker: send, pull, offsets, consumers, schedules, retries, locks, admin."""

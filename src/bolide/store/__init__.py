"""Local durable message storage: commit log, consume queues, index. No networking."""

"""The producer."""

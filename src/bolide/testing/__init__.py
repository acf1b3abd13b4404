"""Helpers for tests: manual clock, faulty file system, in-process cluster."""

"""The bolide command line."""

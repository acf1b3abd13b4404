"""The assembly of in-process servers that ``bolide standalone`` and ``bolide.testing`` share."""

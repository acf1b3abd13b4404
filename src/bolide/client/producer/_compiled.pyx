# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""The compiled twins of :mod:`bolide.client.producer`, one extension:
each ``_x.pyx`` below is the twin of ``x.py`` beside it (the naming rule, docs/compiled.md)."""

include "_bytes.pxi"
include "_results.pyx"

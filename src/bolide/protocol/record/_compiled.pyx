# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""The compiled twins of :mod:`bolide.protocol.record`, one extension: each ``_x.pyx`` below
is the twin of ``x.py`` beside it (the naming rule, docs/compiled.md); ``_layout.pyx`` comes
first, it declares what the other pieces share."""

include "_bytes.pxi"
include "_layout.pyx"
include "_properties.pyx"
include "_messages.pyx"
include "_rows.pyx"
include "_batch.pyx"

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""The compiled twins of :mod:`bolide.protocol.record`: one extension, one piece a twin.

Each ``_x.pyx`` included below is the compiled twin of ``x.py`` beside it, which ends with
``compiled.install(globals(), "bolide.protocol.record._compiled", ...)`` (docs/compiled.md:
the naming rule; ``tests/base/test_twin_rule.py`` checks it). The byte helpers are shared by
every package's extension (``bolide/_bytes.pxi``); ``_layout.pyx`` comes first, it declares
what the other pieces share.
"""

include "_bytes.pxi"
include "_layout.pyx"
include "_properties.pyx"
include "_messages.pyx"
include "_rows.pyx"
include "_batch.pyx"

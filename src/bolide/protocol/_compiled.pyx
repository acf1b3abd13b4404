# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""The compiled twins of :mod:`bolide.protocol`: one extension, one piece a twin.

Each ``_x.pyx`` included below is the compiled twin of ``x.py`` beside it, which ends with
``compiled.install(globals(), "bolide.protocol._compiled", ...)`` (docs/compiled.md: the
naming rule; ``tests/base/test_twin_rule.py`` checks it). The byte helpers are shared by every
package's extension (``bolide/_bytes.pxi``).
"""

include "_bytes.pxi"
include "_frame.pyx"
include "_send_scan.pyx"
include "_answer_frames.pyx"

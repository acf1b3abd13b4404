# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""The compiled twins of :mod:`bolide.client.producer`: one extension, one piece a twin.

Each ``_x.pyx`` included below is the compiled twin of ``x.py`` beside it, which ends with
``compiled.install(globals(), "bolide.client.producer._compiled", ...)`` (docs/compiled.md: the naming
rule; ``tests/base/test_twin_rule.py`` checks it). The byte helpers are shared by every
package's extension (``bolide/_bytes.pxi``).
"""

include "_bytes.pxi"
include "_results.pyx"

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, embedsignature=True
"""The compiled twins of :mod:`bolide.store`: one extension, one piece a twin.

Each ``_x.pyx`` included below is the compiled twin of ``x.py`` beside it, which ends with
``compiled.install(globals(), "bolide.store._compiled", ...)`` (docs/compiled.md: the naming
rule; ``tests/base/test_twin_rule.py`` checks it). The byte helpers are shared by every
package's extension (``bolide/_bytes.pxi``).
"""

include "_bytes.pxi"
include "_index_file.pyx"
include "_records.pyx"
include "_appender.pyx"
include "_recovery_scan.pyx"

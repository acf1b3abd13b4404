"""Debug launcher for the soak (``BOLIDE_SOAK_TRACEMALLOC=DIR``): ``bolide`` under tracemalloc.

bench/fuzz_support.py starts the standalone through this module when the variable names a
directory; a daemon thread then writes a tracemalloc snapshot there every
``BOLIDE_SOAK_TRACEMALLOC_EVERY_S`` seconds (default 60) as ``snapshot-NNN.pickle``, with a
count of live objects per type (``types-NNN.txt``). Diff two with::

    .venv/bin/python bench/soak_trace.py --diff DIR/snapshot-001.pickle DIR/snapshot-004.pickle

Not library code: a bench-only switch to find what grows.
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import threading
import tracemalloc
from pathlib import Path

FRAMES = 12
"""Frames kept per allocation: enough to see the caller that owns the table."""


def _dump_forever(directory: Path, every_s: float) -> None:
    index = 0
    stop = threading.Event()
    while not stop.wait(every_s):
        index += 1
        tracemalloc.take_snapshot().dump(str(directory / f"snapshot-{index:03d}.pickle"))
        counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        lines = [f"{count} {name}" for name, count in counts.most_common(200)]
        (directory / f"types-{index:03d}.txt").write_text("\n".join(lines) + "\n")


def _diff(old_path: str, new_path: str, top: int = 25) -> None:
    old = tracemalloc.Snapshot.load(old_path)
    new = tracemalloc.Snapshot.load(new_path)
    for stat in new.compare_to(old, "traceback")[:top]:
        print(f"{stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} blocks")
        for line in stat.traceback.format()[-FRAMES * 2 :]:
            print("   ", line)


def main() -> None:
    if sys.argv[1:2] == ["--diff"]:
        _diff(sys.argv[2], sys.argv[3])
        return
    directory = Path(os.environ["BOLIDE_SOAK_TRACEMALLOC"])
    directory.mkdir(parents=True, exist_ok=True)
    every_s = float(os.environ.get("BOLIDE_SOAK_TRACEMALLOC_EVERY_S", "60"))
    tracemalloc.start(FRAMES)
    threading.Thread(target=_dump_forever, args=(directory, every_s), daemon=True).start()
    from bolide.cli.app import main as bolide_main

    sys.argv = ["bolide", *sys.argv[1:]]
    bolide_main()


if __name__ == "__main__":
    main()

"""Recovery's commit-log scan, compiled against its pure-Python twin, on one log.

Writes ``--volume-mib`` of 1 KiB records once (bench/store.py's records), then recovers the
same log, without a checkpoint (every record checked and re-dispatched), ``--rounds`` times
with each ``SegmentScanner`` in turn: the compiled one (``_recovery_scan.pyx``) and the pure twin
(``recovery_scan``). Recovering one log alternately keeps the page cache and the machine's
load alike for both, which a separate write per variant (bench/store.py) does not. Prints wall
and process CPU seconds per recovery.

    .venv/bin/python bench/recovery.py [--volume-mib 1024] [--rounds 2] [--dir DIR]

With ``BOLIDE_PURE_PYTHON=1`` the record check under both scanners is the pure one too.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import store as store_bench
from bolide.base import compiled
from bolide.store import recovery


def _scanners() -> dict[str, Any]:
    scanners: dict[str, Any] = {}
    try:
        scanners["compiled"] = importlib.import_module("bolide.store._compiled").SegmentScanner
    except ImportError:
        print("the compiled scan was not built: pure twin only")
    scanners["pure"] = compiled.pure_twin("bolide.store.recovery_scan", "SegmentScanner")
    return scanners


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volume-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None, help="where to write (default: temp dir)")
    arguments = parser.parse_args()
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    base = Path(tempfile.mkdtemp(prefix="bolide-bench-recovery-", dir=arguments.dir))
    count = arguments.volume_mib * store_bench.MIB // store_bench.RECORD_BYTES
    try:
        asyncio.run(store_bench.append_single(base / "log", count))
        scanners = _scanners()
        for _ in range(arguments.rounds):
            for name, scanner in scanners.items():
                recovery.SegmentScanner = scanner  # type: ignore[attr-defined]  # the twin to time
                seconds, scanned, cpu_s = asyncio.run(
                    store_bench.recover_without_checkpoint(base / "log")
                )
                print(
                    f"{name:8} {arguments.volume_mib} MiB: {seconds:.2f} s wall, {cpu_s:.2f} s "
                    f"cpu, {scanned:,} records, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

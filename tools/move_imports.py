"""Rewrite imports of the modules issue 31 moved, in place: ``tools/move_imports.py FILE...``.

For code written against the old names (another branch's new files): every
``from bolide.protocol.{wire,wire_rows,message_codec,record_decoding} import ...`` becomes
``from bolide.protocol.record import ...``; the names ``bolide.protocol.message`` used to
re-export from the record (the properties string, the magic codes) move to the record's door
too; the renamed modules (broker context, blocking facades, the dashboard's page machinery now in
``dashboard/rendering.py``, the CLI's run-time helpers in ``cli/runtime.py``, the benchmark
harness in the ``bolide.bench`` package) get their new paths. Prints each
file it changed and every imported name the new home does not have (removed: the test-only
``encode_record_into`` and ``patch_*``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

RECORD = "bolide.protocol.record"
OLD_RECORD_MODULES = r"bolide\.protocol\.(?:wire|wire_rows|message_codec|record_decoding)"
MOVED_FROM_MESSAGE = frozenset(
    {
        "BLANK_MAGIC_CODE",
        "MESSAGE_MAGIC_CODE",
        "MESSAGE_MAGIC_CODE_V2",
        "NAME_VALUE_SEPARATOR",
        "PROPERTY_SEPARATOR",
        "decode_properties",
        "encode_properties",
        "join_properties",
    }
)
RENAMED_MODULES = (
    ("bolide.broker.handlers.context", "bolide.broker.context"),
    ("bolide.client.admin.blocking", "bolide.client.blocking.admin"),
    ("bolide.client.consumer.sync_consumers", "bolide.client.blocking.consumers"),
    ("bolide.client.producer.sync_transaction", "bolide.client.blocking.transaction"),
    ("bolide.client.sync import Producer", "bolide.client.blocking.producer import Producer"),
    ("bolide.client.sync", "bolide.client.blocking.loop"),
    ("bolide.dashboard.app import _post_allowed", "bolide.dashboard.rendering import post_allowed"),
    ("bolide.dashboard.app import Dashboard,", "bolide.dashboard.rendering import Dashboard,"),
    ("bolide.dashboard.app import Dashboard", "bolide.dashboard.rendering import Dashboard"),
    ("servers.configure_file_logging", "runtime.configure_file_logging"),
    ("servers.configure_console_logging", "runtime.configure_console_logging"),
    ("servers.print_ready", "runtime.print_ready"),
    ("servers.run_until_signalled", "runtime.run_until_signalled"),
    ("servers.advertised_address", "runtime.advertised_address"),
    ("from bolide.cli import servers", "from bolide.cli import runtime, servers"),
    ("bolide.cli.bench_runtime", "bolide.bench.runtime"),
    ("bolide.cli.bench_workloads", "bolide.bench.workloads"),
    ("bolide.cli.bench_raw", "bolide.bench.raw"),
    (
        "from bolide.cli import bench_workloads",
        "from bolide.bench import workloads as bench_workloads",
    ),
)
IMPORT = re.compile(
    rf"^(?P<indent>[ \t]*)from (?P<module>{OLD_RECORD_MODULES}|bolide\.protocol\.message) "
    r"import (?P<names>\([^)]*\)|[^\n]*)",
    re.MULTILINE,
)
LINE_MAX_CHARACTERS = 99


def _names(text: str) -> list[str]:
    text = text.strip().removeprefix("(").removesuffix(")")
    return [part.split("#")[0].strip() for part in text.split(",") if part.split("#")[0].strip()]


def _statement(indent: str, module: str, names: list[str]) -> str:
    line = f"{indent}from {module} import {', '.join(names)}"
    if len(line) <= LINE_MAX_CHARACTERS:
        return line
    inner = "".join(f"{indent}    {name},\n" for name in names)
    return f"{indent}from {module} import (\n{inner}{indent})"


def _rewrite(match: re.Match[str], door: frozenset[str], unknown: list[str]) -> str:
    indent, module = match["indent"], match["module"]
    to_record: list[str] = []
    staying: list[str] = []
    for name in _names(match["names"]):
        original, _, alias = name.partition(" as ")
        original = original.strip()
        if module == "bolide.protocol.message" and original not in MOVED_FROM_MESSAGE:
            staying.append(name)
            continue
        if original not in door:
            unknown.append(original)
        to_record.append(original if alias.strip() in ("", original) else name)
    statements = []
    if staying:
        statements.append(_statement(indent, module, staying))
    if to_record:
        statements.append(_statement(indent, RECORD, to_record))
    return "\n".join(statements)


def main(paths: list[str]) -> int:
    """Rewrite ``paths``; 1 when an imported name has no new home (the message says which)."""
    import bolide.protocol.record as record

    door = frozenset(record.__all__)
    unknown: list[str] = []
    for path in map(Path, paths):
        text = path.read_text()
        new = IMPORT.sub(lambda match: _rewrite(match, door, unknown), text)
        for old, moved in RENAMED_MODULES:
            new = re.sub(rf"\b{re.escape(old)}\b", moved, new)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path}")
    for name in unknown:
        print(f"no longer exists: {name}", file=sys.stderr)
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The broker's metadata JSON files under ``<store root>/config/`` (docs/protocol.md §4.4).

* ``topics.json``             topic configs (TopicConfigManager)
* ``subscriptionGroup.json``  subscription group configs
* ``consumerOffset.json``     committed offsets, ``topic@group`` → {queue id: offset}
* ``delayOffset.json``        schedule progress, delay level → queue offset

Each file is written atomically (temporary file, fsync, rename, directory fsync) after the
previous content is kept as ``<name>.bak``; loading falls back to the ``.bak`` copy when the
main file is missing or damaged (bolide.base.fileio). Files written by a Java broker use
fastjson's unquoted integer keys (``{0:12}``); :func:`parse_fastjson` accepts them.
Blocking file I/O: call from a thread (``asyncio.to_thread``) on a busy loop.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import orjson

from bolide.base.errors import StoreIOError
from bolide.base.fileio import atomic_write_with_backup, read_with_backup


class MetadataFile(enum.Enum):
    """The metadata files, by file name."""

    TOPICS = "topics.json"
    SUBSCRIPTION_GROUPS = "subscriptionGroup.json"
    CONSUMER_OFFSETS = "consumerOffset.json"
    DELAY_OFFSETS = "delayOffset.json"


def store_root_for_data_dir(data_dir: Path) -> Path:
    """The store root (RocketMQ's storePathRootDir) inside a broker data directory."""
    return data_dir / "store"


def config_dir(store_root: Path) -> Path:
    return store_root / "config"


def metadata_path(store_root: Path, which: MetadataFile) -> Path:
    """``<store_root>/config/<file name>``."""
    return config_dir(store_root) / which.value


def save_metadata(store_root: Path, which: MetadataFile, document: Any) -> None:
    """Write ``document`` as JSON (standard JSON, keys as given) atomically, keeping the
    previous file as ``.bak``.

    Raises:
        StoreIOError: the file could not be written (the previous content is intact).
        TypeError: ``document`` holds something JSON cannot express (a programmer error).
    """
    data = orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2)
    path = metadata_path(store_root, which)
    try:
        atomic_write_with_backup(path, data)
    except OSError as error:
        raise StoreIOError(f"write {path}: {error}") from error


def load_metadata(store_root: Path, which: MetadataFile) -> Any | None:
    """The parsed content of the file, from ``.bak`` when the main file is missing or
    damaged; None when neither exists.

    Raises:
        CorruptDataError: every copy that exists fails to parse.
        StoreIOError: a file exists but cannot be read.
    """
    path = metadata_path(store_root, which)
    try:
        return read_with_backup(path, parse_fastjson)
    except OSError as error:
        raise StoreIOError(f"read {path}: {error}") from error


def parse_fastjson(raw: bytes) -> Any:
    """Parse JSON as fastjson writes it: standard JSON, or objects with bare integer keys
    (``{"offsetTable":{"T@G":{0:12,1:7}}}``), whose keys become strings.

    Raises:
        ValueError: the text is neither (orjson.JSONDecodeError is a ValueError).
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return orjson.loads(quote_bare_integer_keys(raw.decode("utf-8")))


def quote_bare_integer_keys(text: str) -> str:
    """Quote the integer object keys fastjson leaves bare, leaving strings untouched:
    ``{0:12,-1:3}`` → ``{"0":12,"-1":3}``."""
    out: list[str] = []
    position = 0
    length = len(text)
    in_string = False
    expect_key = False
    while position < length:
        character = text[position]
        if in_string:
            out.append(character)
            if character == "\\" and position + 1 < length:
                out.append(text[position + 1])
                position += 1
            elif character == '"':
                in_string = False
            position += 1
            continue
        if character == '"':
            in_string = True
            expect_key = False
        elif character in "{,":
            expect_key = True
        elif expect_key and (character.isdigit() or character == "-"):
            end = position + 1
            while end < length and text[end].isdigit():
                end += 1
            rest = end
            while rest < length and text[rest] in " \t\r\n":
                rest += 1
            if rest < length and text[rest] == ":":
                out.append(f'"{text[position:end]}"')
                position = end
                expect_key = False
                continue
        elif not character.isspace():
            expect_key = False
        out.append(character)
        position += 1
    return "".join(out)

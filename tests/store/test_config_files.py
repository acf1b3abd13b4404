from __future__ import annotations

from pathlib import Path

import pytest

from bolide.base.errors import CorruptDataError
from bolide.store.config_files import (
    MetadataFile,
    load_metadata,
    metadata_path,
    parse_fastjson,
    quote_bare_integer_keys,
    save_metadata,
    store_root_for_data_dir,
)


def test_paths_follow_the_rocketmq_layout(tmp_path: Path) -> None:
    root = store_root_for_data_dir(tmp_path)
    assert root == tmp_path / "store"
    names = {which: metadata_path(root, which) for which in MetadataFile}
    assert names[MetadataFile.TOPICS] == root / "config" / "topics.json"
    assert names[MetadataFile.SUBSCRIPTION_GROUPS] == root / "config" / "subscriptionGroup.json"
    assert names[MetadataFile.CONSUMER_OFFSETS] == root / "config" / "consumerOffset.json"
    assert names[MetadataFile.DELAY_OFFSETS] == root / "config" / "delayOffset.json"


def test_save_keeps_a_backup_and_load_falls_back_to_it(tmp_path: Path) -> None:
    assert load_metadata(tmp_path, MetadataFile.CONSUMER_OFFSETS) is None
    save_metadata(tmp_path, MetadataFile.CONSUMER_OFFSETS, {"offsetTable": {"T@G": {0: 1}}})
    save_metadata(tmp_path, MetadataFile.CONSUMER_OFFSETS, {"offsetTable": {"T@G": {0: 2}}})
    assert load_metadata(tmp_path, MetadataFile.CONSUMER_OFFSETS) == {
        "offsetTable": {"T@G": {"0": 2}}
    }
    path = metadata_path(tmp_path, MetadataFile.CONSUMER_OFFSETS)
    path.write_bytes(b'{"offsetTable": {"T@G"')  # torn by hand
    assert load_metadata(tmp_path, MetadataFile.CONSUMER_OFFSETS) == {
        "offsetTable": {"T@G": {"0": 1}}
    }
    path.with_name(path.name + ".bak").write_bytes(b"garbage")
    with pytest.raises(CorruptDataError):
        load_metadata(tmp_path, MetadataFile.CONSUMER_OFFSETS)


def test_fastjson_bare_integer_keys_are_accepted() -> None:
    text = '{"offsetTable":{"T@G":{0:12,1:7},"%RETRY%G@G":{0:0}}}'
    assert parse_fastjson(text.encode()) == {
        "offsetTable": {"T@G": {"0": 12, "1": 7}, "%RETRY%G@G": {"0": 0}}
    }
    assert parse_fastjson(b'{"offsetTable":{1:0,2:0,3:17}}') == {
        "offsetTable": {"1": 0, "2": 0, "3": 17}
    }
    assert quote_bare_integer_keys('{"a":"{0:1}", -3 : [1, 22, {4:5}]}') == (
        '{"a":"{0:1}", "-3" : [1, 22, {"4":5}]}'
    )
    assert quote_bare_integer_keys('{"s":"quote \\" {0:1}"}') == '{"s":"quote \\" {0:1}"}'
    with pytest.raises(ValueError):
        parse_fastjson(b"{0:")

from __future__ import annotations

import pytest

from bolide.base.errors import BackpressureError
from bolide.namesrv.kv_config import KvConfig


def test_put_get_delete() -> None:
    config = KvConfig()
    config.put("ns", "k", "v1")
    config.put("ns", "k", "v2")
    assert config.get("ns", "k") == "v2"
    assert config.items("ns") == {"k": "v2"}
    assert config.get("ns", "missing") is None
    assert config.get("other", "k") is None
    assert config.delete("ns", "k")
    assert not config.delete("ns", "k")
    assert config.items("ns") == {}


def test_entries_are_bounded_over_all_namespaces() -> None:
    config = KvConfig(max_entries=2)
    config.put("a", "k", "v")
    config.put("b", "k", "v")
    config.put("b", "k", "replaced")
    with pytest.raises(BackpressureError):
        config.put("c", "k", "v")
    config.delete("a", "k")
    config.put("c", "k", "v")
    assert config.items("c") == {"k": "v"}

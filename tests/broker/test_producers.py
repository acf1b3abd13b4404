"""ProducerManager: registration, unregister, channel close, 120 s expiry, lookups."""

from __future__ import annotations

from bolide.base.clock import ManualClock
from bolide.base.limits import CLIENT_CHANNEL_EXPIRY_MS
from bolide.broker.channels import ClientChannelInfo
from bolide.broker.producers import ProducerManager
from bolide.protocol.codes import LanguageCode


def _info(channel: str, client_id: str | None = None) -> ClientChannelInfo[str]:
    return ClientChannelInfo(
        channel=channel,
        client_id=client_id or f"10.0.0.1@{channel}",
        language=LanguageCode.JAVA,
        version=401,
        remote_address=f"10.0.0.1:{1000 + len(channel)}",
    )


def test_register_reports_new_channels_only() -> None:
    manager: ProducerManager[str] = ProducerManager(ManualClock())
    assert manager.register_producer("PG", _info("c1"))
    assert not manager.register_producer("PG", _info("c1"))
    assert manager.register_producer("PG", _info("c2"))
    assert manager.register_producer("OTHER", _info("c1"))
    assert manager.groups() == ["OTHER", "PG"]
    assert [i.channel for i in manager.producer_connections("PG")] == ["c1", "c2"]
    assert manager.producer_connections("missing") == []


def test_heartbeat_refreshes_fields_and_timestamp() -> None:
    clock = ManualClock()
    manager: ProducerManager[str] = ProducerManager(clock)
    manager.register_producer("PG", _info("c1"))
    clock.advance_ms(5_000)
    refreshed = _info("c1")
    refreshed.version = 63
    refreshed.language = LanguageCode.CPP
    manager.register_producer("PG", refreshed)
    (stored,) = manager.producer_connections("PG")
    assert stored.version == 63
    assert stored.language is LanguageCode.CPP
    assert stored.last_update_ms == 5_000


def test_unregister_and_channel_close_drop_channels_and_empty_groups() -> None:
    manager: ProducerManager[str] = ProducerManager(ManualClock())
    manager.register_producer("PG", _info("c1"))
    manager.register_producer("PG", _info("c2"))
    manager.register_producer("OTHER", _info("c1"))
    assert manager.unregister_producer("PG", "c2")
    assert not manager.unregister_producer("PG", "c2")
    assert not manager.unregister_producer("missing", "c1")
    assert manager.do_channel_close("c1") == ["OTHER", "PG"]
    assert manager.groups() == []
    assert manager.do_channel_close("c1") == []


def test_channel_expires_after_exactly_120_s_without_heartbeat() -> None:
    clock = ManualClock()
    manager: ProducerManager[str] = ProducerManager(clock)
    manager.register_producer("PG", _info("quiet"))
    manager.register_producer("PG", _info("chatty"))
    manager.register_producer("OTHER", _info("quiet"))
    clock.advance_ms(60_000)
    manager.register_producer("PG", _info("chatty"))
    clock.advance_ms(CLIENT_CHANNEL_EXPIRY_MS - 60_000 - 1)
    assert manager.scan_not_active_channel() == []
    clock.advance_ms(1)
    assert manager.scan_not_active_channel() == ["quiet"]
    assert manager.groups() == ["PG"]
    assert [i.channel for i in manager.producer_connections("PG")] == ["chatty"]


def test_find_channel_goes_round_and_skips_unusable_channels() -> None:
    manager: ProducerManager[str] = ProducerManager(ManualClock())
    for channel in ("a", "b", "c"):
        manager.register_producer("PG", _info(channel))
    picked = [manager.find_channel("PG") for _ in range(4)]
    assert [info.channel for info in picked if info is not None] == ["a", "b", "c", "a"]
    only_c = manager.find_channel("PG", usable=lambda channel: channel == "c")
    assert only_c is not None and only_c.channel == "c"
    assert manager.find_channel("PG", usable=lambda _channel: False) is None
    assert manager.find_channel("missing") is None


def test_find_channel_by_client_id_prefers_the_freshest() -> None:
    clock = ManualClock()
    manager: ProducerManager[str] = ProducerManager(clock)
    manager.register_producer("PG", _info("old", client_id="cid"))
    clock.advance_ms(10)
    manager.register_producer("OTHER", _info("new", client_id="cid"))
    found = manager.find_channel_by_client_id("cid")
    assert found is not None and found.channel == "new"
    assert manager.find_channel_by_client_id("nobody") is None


def test_producer_connection_body() -> None:
    manager: ProducerManager[str] = ProducerManager(ManualClock())
    manager.register_producer("PG", _info("c2", client_id="b"))
    manager.register_producer("PG", _info("c1", client_id="a"))
    body = manager.producer_connection("PG")
    assert [c.client_id for c in body.connection_set] == ["a", "b"]
    assert body.connection_set[0].version == 401
    assert b'"language":"JAVA"' in body.to_json()
    assert manager.producer_connection("missing").connection_set == ()

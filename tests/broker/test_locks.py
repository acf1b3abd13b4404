"""RebalanceLockManager with a manual clock: lock, renewal, expiry, steal after expiry, unlock
by the owner only, the table bound, and the check-and-set under concurrent callers."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.broker.locks import RebalanceLockManager
from bolide.protocol.bodies import MessageQueue

GROUP = "orders-orderly"
Q0, Q1, Q2 = (MessageQueue("orders", "broker-a", queue_id) for queue_id in range(3))
A, B = "10.0.0.1@1#a", "10.0.0.2@2#b"


def manager(
    live_ms: int = limits.REBALANCE_LOCK_MAX_LIVE_MS,
) -> tuple[RebalanceLockManager, ManualClock]:
    clock = ManualClock()
    return RebalanceLockManager(clock, lock_max_live_ms=live_ms), clock


def test_a_free_queue_is_locked_and_others_are_refused() -> None:
    locks, _ = manager()
    assert locks.try_lock_batch(GROUP, [Q0, Q1], A) == {Q0, Q1}
    assert locks.try_lock_batch(GROUP, [Q0, Q1, Q2], B) == {Q2}
    assert locks.holder(GROUP, Q0) == A
    assert locks.is_locked(GROUP, Q2, B)
    assert not locks.is_locked(GROUP, Q2, A)
    assert locks.locked_queues(GROUP) == {Q0: A, Q1: A, Q2: B}


def test_the_default_lifetime_is_rocketmqs_sixty_seconds() -> None:
    locks = RebalanceLockManager(ManualClock())
    assert locks.lock_max_live_ms == 60_000


def test_a_lock_expires_after_its_lifetime_without_renewal() -> None:
    locks, clock = manager()
    assert locks.try_lock(GROUP, Q0, A)
    clock.advance_ms(60_000)
    assert locks.holder(GROUP, Q0) == A, "exactly the lifetime is not past it"
    assert not locks.try_lock(GROUP, Q0, B)
    clock.advance_ms(1)
    assert locks.holder(GROUP, Q0) is None
    assert locks.locked_queues(GROUP) == {}


def test_renewal_refreshes_the_lease() -> None:
    locks, clock = manager()
    assert locks.try_lock(GROUP, Q0, A)
    for _ in range(5):  # renewed every 20 s, as lockAll does: held for 100 s and more
        clock.advance_ms(20_000)
        assert locks.try_lock_batch(GROUP, [Q0], A) == {Q0}
    clock.advance_ms(59_999)
    assert not locks.try_lock(GROUP, Q0, B)
    assert locks.holder(GROUP, Q0) == A


def test_another_client_steals_an_expired_lock_and_the_old_holder_is_refused() -> None:
    locks, clock = manager()
    assert locks.try_lock_batch(GROUP, [Q0, Q1], A) == {Q0, Q1}
    clock.advance_ms(30_000)
    assert locks.try_lock(GROUP, Q1, A)  # A renews only Q1
    clock.advance_ms(30_001)
    assert locks.try_lock_batch(GROUP, [Q0, Q1], B) == {Q0}
    assert locks.holder(GROUP, Q0) == B
    assert locks.try_lock_batch(GROUP, [Q0, Q1], A) == {Q1}
    assert locks.locked_queues(GROUP) == {Q0: B, Q1: A}


def test_an_expired_lock_nobody_took_is_renewed_by_its_holder() -> None:
    locks, clock = manager()
    assert locks.try_lock(GROUP, Q0, A)
    clock.advance_ms(120_000)
    assert locks.try_lock(GROUP, Q0, A)
    assert not locks.try_lock(GROUP, Q0, B)


def test_unlock_by_a_non_owner_is_ignored() -> None:
    locks, _ = manager()
    assert locks.try_lock_batch(GROUP, [Q0, Q1], A) == {Q0, Q1}
    assert locks.unlock_batch(GROUP, [Q0, Q1], B) == frozenset()
    assert locks.locked_queues(GROUP) == {Q0: A, Q1: A}
    assert not locks.try_lock(GROUP, Q0, B)


def test_unlock_by_the_owner_frees_the_queue_at_once() -> None:
    locks, _ = manager()
    assert locks.try_lock_batch(GROUP, [Q0, Q1], A) == {Q0, Q1}
    assert locks.unlock_batch(GROUP, [Q0, Q2], A) == {Q0}
    assert locks.entry_count == 1
    assert locks.try_lock(GROUP, Q0, B)
    assert locks.unlock_batch("unknown-group", [Q0], A) == frozenset()
    assert locks.unlock_batch(GROUP, [Q1], A) == {Q1}
    assert locks.locked_queues(GROUP) == {Q0: B}


def test_unlock_client_releases_only_that_clients_locks_in_that_group() -> None:
    locks, _ = manager()
    assert locks.try_lock_batch(GROUP, [Q0, Q1], A) == {Q0, Q1}
    assert locks.try_lock(GROUP, Q2, B)
    assert locks.try_lock("other-group", Q0, A)
    assert locks.unlock_client(GROUP, A) == {Q0, Q1}
    assert locks.locked_queues(GROUP) == {Q2: B}
    assert locks.locked_queues("other-group") == {Q0: A}
    assert locks.unlock_client("no-group", A) == frozenset()


def test_groups_lock_independently() -> None:
    locks, _ = manager()
    assert locks.try_lock("g1", Q0, A)
    assert locks.try_lock("g2", Q0, B)
    assert locks.unlock_batch("g1", [Q0], B) == frozenset()
    assert locks.holder("g1", Q0) == A
    assert locks.holder("g2", Q0) == B


def test_a_full_table_purges_expired_entries_then_refuses_new_queues() -> None:
    clock = ManualClock()
    locks = RebalanceLockManager(clock, lock_max_live_ms=1_000, max_entries=2)
    assert locks.try_lock_batch("g1", [Q0, Q1], A) == {Q0, Q1}
    assert locks.try_lock("g2", Q2, B) is False, "no room and nothing expired"
    assert locks.try_lock_batch("g1", [Q0], A) == {Q0}, "renewing an entry needs no room"
    clock.advance_ms(1_001)
    assert locks.try_lock("g2", Q2, B), "expired entries were purged to make room"
    assert locks.entry_count == 1
    assert locks.locked_queues("g1") == {}
    assert locks.locked_queues("g2") == {Q2: B}


def test_check_and_set_is_atomic_under_concurrent_callers() -> None:
    locks, _ = manager()
    winners: list[str] = []
    barrier = threading.Barrier(8)

    def contend(client_id: str) -> None:
        barrier.wait()
        for _ in range(200):
            if locks.try_lock(GROUP, Q0, client_id):
                winners.append(client_id)

    threads = [threading.Thread(target=contend, args=(f"c{index}",)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(winners)) == 1, f"several clients got the lock: {set(winners)}"
    assert locks.holder(GROUP, Q0) == winners[0]


# ---- a model check: any interleaving of lock, unlock and time keeps one holder per queue ---

CLIENTS = ("a", "b", "c")
QUEUES = (Q0, Q1)
operation: st.SearchStrategy[tuple[str, object, object]] = st.one_of(
    st.tuples(st.just("lock"), st.sampled_from(CLIENTS), st.sets(st.sampled_from(QUEUES))),
    st.tuples(st.just("unlock"), st.sampled_from(CLIENTS), st.sets(st.sampled_from(QUEUES))),
    st.tuples(st.just("advance"), st.integers(0, 1_500), st.just(set())),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(operation, max_size=40))
def test_the_table_matches_a_model_of_leases(operations: list[tuple[str, object, object]]) -> None:
    live_ms = 1_000
    clock = ManualClock()
    locks = RebalanceLockManager(clock, lock_max_live_ms=live_ms)
    model: dict[MessageQueue, tuple[str, int]] = {}  # queue -> (holder, last update)
    for kind, argument, queues in operations:
        now = clock.monotonic_ms()
        if kind == "advance":
            assert isinstance(argument, int)
            clock.advance_ms(argument)
            continue
        assert isinstance(argument, str) and isinstance(queues, set)
        if kind == "lock":
            expected = set()
            for queue in queues:
                holder = model.get(queue)
                if holder is None or holder[0] == argument or now - holder[1] > live_ms:
                    model[queue] = (argument, now)
                    expected.add(queue)
            assert locks.try_lock_batch("g", queues, argument) == expected
        else:
            released = {queue for queue in queues if model.get(queue, ("",))[0] == argument}
            for queue in released:
                del model[queue]
            assert locks.unlock_batch("g", queues, argument) == released
        live = {q: h for q, (h, at) in model.items() if clock.monotonic_ms() - at <= live_ms}
        assert locks.locked_queues("g") == live

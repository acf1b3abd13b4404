"""The election rule and 1001's checks, pure (round3-facts §1.3, §1.4)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bolide.controller.replicas import (
    CONTROLLER_TRIGGER_BROKER_ID,
    BrokerReplica,
    Candidate,
    ReplicaSet,
    check_alter_sync_state_set,
    elect_master,
)
from bolide.protocol.bodies.fastjson import BodyError
from bolide.protocol.codes import ResponseCode


def replica_set(master: int | None, members: set[int], epoch: int = 3) -> ReplicaSet:
    replicas = {i: BrokerReplica(f"h:{i}", f"h:{i};1") for i in (1, 2, 3)}
    return ReplicaSet("c", "b", replicas, 4, master, epoch, frozenset(members), 5)


def live(*candidates: Candidate) -> Callable[[int], Candidate | None]:
    table = {candidate.broker_id: candidate for candidate in candidates}
    return table.get


def test_first_election_takes_the_requester() -> None:
    fresh = replica_set(None, set(), epoch=0)
    outcome = elect_master(fresh, 2, live())
    assert outcome.code == ResponseCode.SUCCESS
    elected = outcome.replica_set
    assert (elected.master_broker_id, elected.master_epoch) == (2, 1)
    assert (elected.sync_state_set, elected.sync_state_set_epoch) == ({2}, 6)


def test_rank_epoch_then_offset_then_priority() -> None:
    current = replica_set(1, {1, 2, 3})
    by_epoch = live(Candidate(2, 4, 10, 9), Candidate(3, 3, 999, 0))
    assert elect_master(current, -1, by_epoch).replica_set.master_broker_id == 2
    by_offset = live(Candidate(2, 3, 10, 0), Candidate(3, 3, 20, 9))
    assert elect_master(current, -1, by_offset).replica_set.master_broker_id == 3
    by_priority = live(Candidate(2, 3, 10, 5), Candidate(3, 3, 10, 1))
    assert elect_master(current, -1, by_priority).replica_set.master_broker_id == 3


def test_only_in_sync_replicas_unless_unclean() -> None:
    current = replica_set(1, {1, 2})
    outsider = live(Candidate(3, 9, 999, 0))
    refused = elect_master(current, 3, outsider)
    assert refused.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert refused.replica_set == current
    cleared = elect_master(current, CONTROLLER_TRIGGER_BROKER_ID, outsider)
    assert cleared.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert cleared.replica_set.master_broker_id is None
    assert cleared.replica_set.master_epoch == 4
    assert cleared.replica_set.sync_state_set == {1, 2}
    unclean = elect_master(current, 3, outsider, unclean=True)
    assert unclean.replica_set.master_broker_id == 3


def test_live_master_stays_unless_designated() -> None:
    current = replica_set(1, {1, 2})
    both = live(Candidate(1, 3, 10, 0), Candidate(2, 3, 10, 0))
    assert elect_master(current, 2, both).code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    designated = elect_master(current, 2, both, designate=True)
    assert designated.replica_set.master_broker_id == 2
    not_candidate = elect_master(current, 3, both, designate=True)
    assert not_candidate.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED


@pytest.mark.parametrize(
    ("master", "epoch", "members", "set_epoch", "code"),
    [
        (1, 3, {1}, 5, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),  # unchanged
        (2, 3, {1, 2}, 5, ResponseCode.CONTROLLER_INVALID_MASTER),
        (1, 2, {1, 2}, 5, ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
        (1, 3, {1, 2}, 4, ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        (1, 3, {1, 7}, 5, ResponseCode.CONTROLLER_INVALID_REPLICAS),
        (1, 3, {1, 3}, 5, ResponseCode.CONTROLLER_BROKER_NOT_ALIVE),
        (1, 3, {2}, 5, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),  # lacks the master
        (1, 3, {1, 2}, 5, ResponseCode.SUCCESS),
    ],
)
def test_alter_checks(
    master: int, epoch: int, members: set[int], set_epoch: int, code: ResponseCode
) -> None:
    current = replica_set(1, {1})
    answer, _ = check_alter_sync_state_set(
        current, master, epoch, frozenset(members), set_epoch, lambda broker_id: broker_id != 3
    )
    assert answer == code


def test_stored_value_round_trip_and_garbage() -> None:
    current = replica_set(1, {1, 2})
    assert ReplicaSet.from_json(current.to_json()) == current
    with pytest.raises(BodyError):
        ReplicaSet.from_json(b'{"clusterName":"c"}')

"""The accounts files: plain_acl.yml plus the acl/ directory beside it (RocketMQ 4.9.3+),
changes written to the file that defines an account, and the watcher's hot reload (driven by
a manual clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from bolide.acl import AclConfigError, AclFile, AclFileWatcher
from bolide.base.clock import ManualClock

MAIN = "accounts:\n  - {accessKey: mainUser1, secretKey: main-secret}\n"
EXTRA = (
    "globalWhiteRemoteAddresses: [10.1.1.*]\n"
    "accounts:\n  - {accessKey: teamUser1, secretKey: team-secret, defaultTopicPerm: PUB}\n"
)


@pytest.fixture
def files(tmp_path: Path) -> AclFile:
    (tmp_path / "acl" / "team").mkdir(parents=True)
    (tmp_path / "plain_acl.yml").write_text(MAIN)
    (tmp_path / "acl" / "team" / "team.yaml").write_text(EXTRA)
    (tmp_path / "acl" / "notes.txt").write_text("not an accounts file")
    return AclFile(tmp_path / "plain_acl.yml", None, ManualClock())


def test_directory_files_are_merged(files: AclFile, tmp_path: Path) -> None:
    rules = files.load()
    assert set(rules.accounts) == {"mainUser1", "teamUser1"}
    assert rules.sources["teamUser1"] == str(tmp_path / "acl" / "team" / "team.yaml")
    assert [p.text for p in rules.global_white_addresses] == ["10.1.1.*"]
    assert set(rules.file_versions) == {str(p) for p in files.paths()}


def test_an_account_in_two_files_is_refused(files: AclFile, tmp_path: Path) -> None:
    (tmp_path / "acl" / "copy.yml").write_text(MAIN)
    with pytest.raises(AclConfigError, match=r"mainUser1.*defined in"):
        files.load()


def test_changes_go_to_the_file_that_defines_the_account(files: AclFile, tmp_path: Path) -> None:
    files.load()
    files.update_account({"accessKey": "teamUser1", "defaultTopicPerm": "SUB"})
    team = yaml.safe_load((tmp_path / "acl" / "team" / "team.yaml").read_text())
    assert team["accounts"][0]["defaultTopicPerm"] == "SUB"
    assert team["accounts"][0]["secretKey"] == "team-secret"  # kept
    assert team["dataVersion"][0]["counter"] == 1
    files.update_account({"accessKey": "newUser01", "secretKey": "new-secret"})
    main = yaml.safe_load((tmp_path / "plain_acl.yml").read_text())
    assert [a["accessKey"] for a in main["accounts"]] == ["mainUser1", "newUser01"]
    assert files.validator.authenticate("newUser01", "new-secret") is not None
    # a white list for a file that is not one of the accounts files: refused, nothing written
    before = (tmp_path / "plain_acl.yml").read_bytes()
    with pytest.raises(AclConfigError):
        files.update_global_white_addresses(["10.2.2.*"], "/elsewhere/file.yml")
    assert (tmp_path / "plain_acl.yml").read_bytes() == before
    assert files.delete_account("teamUser1")
    assert not files.delete_account("teamUser1")


async def _settle(watcher: AclFileWatcher, condition: Callable[[], bool]) -> None:
    """Wake the watcher until ``condition`` holds (bounded: 200 rounds; its step reads the
    files in a worker thread, so a round yields to the loop for a moment)."""
    for _ in range(200):
        watcher.wakeup()
        await asyncio.sleep(0.01)
        if condition():
            return
    raise AssertionError("the watcher did not get there")


async def test_watcher_reloads_added_and_broken_files(files: AclFile, tmp_path: Path) -> None:
    clock = ManualClock()
    files.load()
    watcher = AclFileWatcher(files, clock)
    watcher.start()
    try:
        extra = tmp_path / "acl" / "more.yml"
        extra.write_text("accounts:\n  - {accessKey: lateUser1, secretKey: late-secret}\n")
        await _settle(watcher, lambda: watcher.reload_count == 1)
        assert files.validator.account("lateUser1") is not None
        extra.write_text("accounts: [")
        await _settle(watcher, lambda: watcher.last_error is not None)
        assert files.validator.account("lateUser1") is not None  # previous rules kept
        extra.unlink()
        await _settle(watcher, lambda: watcher.reload_count == 2)
        assert files.validator.account("lateUser1") is None
    finally:
        await watcher.stop()

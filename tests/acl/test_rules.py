"""plain_acl.yml parsing: RocketMQ's sample, defaults, and every malformed case refused."""

from __future__ import annotations

import pytest

from bolide.acl import AclConfigError, Perm
from bolide.acl.rules import load_yaml_document, parse_rules

SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
dataVersion:
  - counter: 3
    timestamp: 1700000000000
"""


ACCOUNT = "accounts:\n  - accessKey: RocketMQ\n    secretKey: 1234567\n"


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_rules(load_yaml_document(text, "plain_acl.yml"), "plain_acl.yml")


def test_rocketmq_sample_file() -> None:
    rules = parse(SAMPLE)
    assert [p.text for p in rules.global_white_addresses] == ["10.10.103.*", "192.168.0.*"]
    first = rules.accounts["RocketMQ"]
    assert first.secret_key == "12345678"  # a YAML number, read as its digits
    assert not first.admin
    assert first.default_topic_perm is Perm.DENY
    assert first.default_group_perm is Perm.SUB
    assert dict(first.topic_perms) == {"topicA": Perm.DENY, "topicB": Perm.PUB | Perm.SUB,
                                       "topicC": Perm.SUB}  # fmt: skip
    assert first.owned_perm("%RETRY%groupA", is_group=True) is Perm.DENY
    assert first.owned_perm("%RETRY%other", is_group=True) is Perm.SUB
    second = rules.accounts["rocketmq2"]
    assert second.admin and not second.lists_resources
    assert second.default_topic_perm is Perm.DENY  # missing: DENY, as RocketMQ
    assert second.white_remote_address.matches("192.168.1.20")
    assert (rules.data_version_counter, rules.data_version_timestamp_ms) == (3, 1700000000000)


def test_secret_is_not_in_repr() -> None:
    assert "12345678" not in repr(parse(SAMPLE).accounts["RocketMQ"])


def test_empty_file_has_no_accounts() -> None:
    assert not parse("").accounts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts: [", "not valid YAML"),
        ("- a\n- b\n", "expected a mapping"),
        ("acounts: []\n", "unknown keys"),
        ("accounts: {a: 1}\n", "accounts must be a list"),
        ("accounts:\n  - secretKey: 12345678\n", "accessKey: missing"),
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "shorter than 7"),
        ("accounts:\n  - accessKey: RocketMQ\n", "secretKey: missing"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 1234567\n    admin: yes!\n",
         "expected true or false"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 1234567\n    defaultTopicPerm: PUBB\n",
         "permission 'PUBB'"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 1234567\n    topicPerms: [a]\n",
         "not name=PERM"),
        (ACCOUNT + "    topicPerms: [a=PUB=SUB]\n", "not name=PERM"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 1234567\n    whiteRemoteAddress: x\n",
         "address pattern"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 1234567\n    secretkey: 2\n",
         "unknown keys"),
        ("accounts:\n  - {accessKey: RocketMQ, secretKey: 1234567}\n"
         "  - {accessKey: RocketMQ, secretKey: 7654321}\n", "listed twice"),
        ("globalWhiteRemoteAddresses: [1.2.3]\n", "address pattern"),
        ("dataVersion: [{counter: x}]\n", "dataVersion"),
    ],
)  # fmt: skip
def test_malformed_files_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(AclConfigError, match=message):
        parse(text)


def test_binary_file_is_refused() -> None:
    with pytest.raises(AclConfigError):
        parse("\x00\x01\x02: \x03")


def test_a_yaml_error_does_not_show_the_line_it_is_on() -> None:
    with pytest.raises(AclConfigError) as caught:
        parse('accounts:\n  - accessKey: RocketMQ\n    secretKey: "topSecret99\n')
    assert "at line 4, column 1" in str(caught.value)
    assert "topSecret99" not in str(caught.value)

"""ACL 1.0 accounts (``plain_acl.yml``) as ACL 2.0 users and policies, as RocketMQ 5.3's
``AuthMigrator`` makes them (broker key ``migrateAuthFromV1Enabled``, and ``bolide acl
migrate`` on a file):

* each account becomes a user named by its access key, its password the secret key; an
  ``admin: true`` account a Super user (never checked against policies), the others Normal;
* ``topicPerms`` / ``groupPerms`` become the entries of the ``Custom`` policy on
  ``Topic:<name>`` / ``Group:<name>``; ``defaultTopicPerm`` / ``defaultGroupPerm`` the
  ``Default`` policy's entries on ``Topic:*`` / ``Group:*``;
* a permission becomes actions and a decision: PUB -> Pub, SUB -> Sub, PUB|SUB -> Pub and
  Sub, all Allow; DENY -> All, Deny;
* a user that already exists is left alone, with its policies (a second run changes nothing).

Not carried over, as in RocketMQ: ``whiteRemoteAddress`` and ``globalWhiteRemoteAddresses``
(1.0's "skip every check from these addresses" has no 2.0 equivalent; a policy's
``sourceIps`` restricts instead). :func:`migrate` names the accounts that had them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bolide.acl.permissions import Perm
from bolide.acl.rules import AclAccount, AclRules
from bolide.acl.v2_auth import AuthV2
from bolide.acl.v2_model import (
    Acl,
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserType,
    subject_of,
)

__all__ = ["MigrationReport", "acl_of_account", "migrate", "user_of_account"]


@dataclass(slots=True)
class MigrationReport:
    """What :func:`migrate` did: users created, users left as they were, and warnings."""

    created: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def user_of_account(account: AclAccount) -> User:
    """The 2.0 user of a 1.0 account (Super for an admin account)."""
    user_type = UserType.SUPER if account.admin else UserType.NORMAL
    return User(account.access_key, account.secret_key, user_type)


def _entry(kind: ResourceType, name: str | None, perm: Perm) -> PolicyEntry:
    if name is None:
        resource = Resource(kind, None, ResourcePattern.ANY)
    else:
        resource = Resource(kind, name, ResourcePattern.LITERAL)
    if perm & Perm.DENY or not perm & (Perm.PUB | Perm.SUB):
        return PolicyEntry.build(resource, [Action.ALL], decision=Decision.DENY)
    actions = [action for bit, action in ((Perm.PUB, Action.PUB), (Perm.SUB, Action.SUB))
               if perm & bit]  # fmt: skip
    return PolicyEntry.build(resource, actions, decision=Decision.ALLOW)


def acl_of_account(account: AclAccount) -> Acl:
    """The 2.0 policies of a 1.0 account (module docstring)."""
    custom = tuple(
        [_entry(ResourceType.TOPIC, name, perm) for name, perm in account.topic_perms.items()]
        + [_entry(ResourceType.GROUP, name, perm) for name, perm in account.group_perms.items()]
    )
    default = (
        _entry(ResourceType.TOPIC, None, account.default_topic_perm),
        _entry(ResourceType.GROUP, None, account.default_group_perm),
    )
    policies: dict[PolicyType, tuple[PolicyEntry, ...]] = {PolicyType.DEFAULT: default}
    if custom:
        policies[PolicyType.CUSTOM] = custom
    return Acl(subject_of(account.access_key), policies)


def migrate(rules: AclRules, auth: AuthV2) -> MigrationReport:
    """Create a user and its policies in ``auth`` (written to its store at once) for every
    account of ``rules`` whose user does not exist yet."""
    report = MigrationReport()
    if rules.global_white_addresses:
        patterns = ", ".join(pattern.text for pattern in rules.global_white_addresses)
        report.warnings.append(f"globalWhiteRemoteAddresses ({patterns}) not migrated")
    for access_key, account in sorted(rules.accounts.items()):
        if account.white_remote_address.text:
            report.warnings.append(
                f"whiteRemoteAddress {account.white_remote_address.text!r} of {access_key} "
                "not migrated"
            )
        if access_key in auth.users:
            report.skipped.append(access_key)
            continue
        auth.put_user(user_of_account(account))
        auth.put_acl(acl_of_account(account))
        report.created.append(access_key)
    return report

"""``bolide acl list|version|update|delete|white-list``: the accounts of brokers with
``aclEnable=true`` (RocketMQ's ACL 1.0; mqadmin's updateAclConfig, deleteAclConfig,
clusterAclConfigVersion, updateGlobalWhiteAddr, getAclConfig). Every one needs an admin
account: ``--access-key/--secret-key`` or $BOLIDE_ACCESS_KEY/$BOLIDE_SECRET_KEY.
Changes go to every master (of ``--cluster``) or to the ``--broker``s named.

``bolide acl migrate PLAIN_ACL_YML``: the accounts of an ACL 1.0 file as ACL 2.0 users and
policies on brokers running ACL 2.0 (:mod:`bolide.acl.migration`; signed by a Super user),
users that exist already left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bolide.acl import AclConfigError, AclFile
from bolide.acl.migration import acl_of_account, user_of_account
from bolide.base.clock import SystemClock
from bolide.cli import users
from bolide.cli.common import (
    AdminCommand,
    BrokerOption,
    ClusterOption,
    ExitCode,
    admin_options,
    fail,
)
from bolide.client.admin import AdminClient
from bolide.client.admin import acl as admin_acl
from bolide.client.admin import auth as admin_auth

__all__ = ["register"]

app = typer.Typer(help="ACL accounts and white lists of brokers (admin only).",
                  no_args_is_help=True)  # fmt: skip


def register(root: typer.Typer) -> None:
    """Add the ``acl`` group (with ACL 2.0's ``acl policy``) and ``user`` to ``root``."""
    app.add_typer(users.policy_app, name="policy")
    root.add_typer(app, name="acl")
    users.register(root)


@app.command("list")
@admin_options
def list_accounts(
    show_secrets: Annotated[
        bool, typer.Option("--show-secrets", help="Print secret keys too.")
    ] = False,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """The accounts and the global white list of each broker."""
    output = command.output
    configs = command.run(
        lambda admin: admin_acl.acl_config(admin, cluster=cluster, brokers=broker or ())
    )
    documents: dict[str, Any] = {}
    for name, config in configs.items():
        accounts = [_shown(account, show_secrets) for account in config.accounts]
        documents[name] = {"globalWhiteAddrs": config.global_white_addresses, "accounts": accounts}
    if output.json_output:
        output.json(documents)
        return
    for name, document in documents.items():
        white = ", ".join(document["globalWhiteAddrs"]) or "-"
        output.table(
            f"{name} (global white list: {white})",
            ["accessKey", "secretKey", "admin", "whiteRemoteAddress", "defaultTopicPerm",
             "defaultGroupPerm", "topicPerms", "groupPerms"],
            [
                [a.get("accessKey"), a.get("secretKey"), a.get("admin"),
                 a.get("whiteRemoteAddress"), a.get("defaultTopicPerm"),
                 a.get("defaultGroupPerm"), ", ".join(a.get("topicPerms") or []),
                 ", ".join(a.get("groupPerms") or [])]
                for a in document["accounts"]
            ],
        )  # fmt: skip


def _shown(account: dict[str, Any], show_secrets: bool) -> dict[str, Any]:
    if show_secrets:
        return account
    return {**account, "secretKey": "******"}


@app.command("version")
@admin_options
def version(
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """The data version of each broker's accounts file (it moves with every change)."""
    output = command.output
    infos = command.run(
        lambda admin: admin_acl.acl_info(admin, cluster=cluster, brokers=broker or ())
    )
    rows = [[name, i.broker_addr, i.cluster_name, i.version] for name, i in infos.items()]
    if output.json_output:
        output.json({row[0]: {"brokerAddr": row[1], "clusterName": row[2], "version": row[3]}
                     for row in rows})  # fmt: skip
        return
    output.table(None, ["broker", "address", "cluster", "version"], rows)


@app.command("update")
@admin_options
def update(
    access_key: Annotated[str, typer.Argument(help="The account's access key.")],
    account_secret: Annotated[
        str | None,
        typer.Option("--account-secret", help="Its secret key (required for a new account)."),
    ] = None,
    admin_account: Annotated[
        bool, typer.Option("--admin/--no-admin", help="Whether it is an admin account.")
    ] = False,
    white_address: Annotated[
        str | None, typer.Option("--white-address", help="Its whiteRemoteAddress pattern.")
    ] = None,
    default_topic_perm: Annotated[
        str | None, typer.Option("--default-topic-perm", help="PUB, SUB, PUB|SUB or DENY.")
    ] = None,
    default_group_perm: Annotated[
        str | None, typer.Option("--default-group-perm", help="PUB, SUB, PUB|SUB or DENY.")
    ] = None,
    topic_perm: Annotated[
        list[str] | None, typer.Option("--topic-perm", help="topic=PERM; repeatable.")
    ] = None,
    group_perm: Annotated[
        list[str] | None, typer.Option("--group-perm", help="group=PERM; repeatable.")
    ] = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Create an account or change it (options left out keep their value)."""
    change = admin_acl.AclAccountUpdate(
        access_key=access_key,
        secret_key=account_secret,
        white_remote_address=white_address,
        admin=admin_account,
        default_topic_perm=default_topic_perm,
        default_group_perm=default_group_perm,
        topic_perms=topic_perm,
        group_perms=group_perm,
    )
    command.change_brokers(
        lambda admin: admin_acl.update_acl_account(
            admin, change, cluster=cluster, brokers=broker or ()
        ),
        "account", access_key, "updated on",
    )  # fmt: skip


@app.command("delete")
@admin_options
def delete(
    access_key: Annotated[str, typer.Argument(help="The account's access key.")],
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Delete an account."""
    command.change_brokers(
        lambda admin: admin_acl.delete_acl_account(
            admin, access_key, cluster=cluster, brokers=broker or ()
        ),
        "account", access_key, "deleted on",
    )  # fmt: skip


@app.command("white-list")
@admin_options
def white_list(
    patterns: Annotated[
        list[str] | None,
        typer.Argument(help="Address patterns (10.0.0.*, 192.168.1.10-20...); none: empty."),
    ] = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Replace the global white list (peers matching it skip every ACL check)."""
    chosen = patterns or []
    command.change_brokers(
        lambda admin: admin_acl.update_global_white_addresses(
            admin, chosen, cluster=cluster, brokers=broker or ()
        ),
        "globalWhiteAddrs", ",".join(chosen), "set on",
    )  # fmt: skip


@app.command("migrate")
@admin_options
def migrate_file(
    acl_file: Annotated[Path, typer.Argument(help="The ACL 1.0 file (plain_acl.yml).")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be created; change nothing.")
    ] = False,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """ACL 1.0 accounts -> ACL 2.0 users and policies (as migrateAuthFromV1Enabled); the
    file's ``acl/`` directory is read too, as the broker reads it."""
    output = command.output
    try:
        rules, _, _ = AclFile(acl_file, None, SystemClock()).read()
    except (AclConfigError, OSError) as error:
        fail(output, f"cannot read {acl_file}: {error}", ExitCode.USAGE)
    ignored = [key for key, account in sorted(rules.accounts.items())
               if account.white_remote_address.text]  # fmt: skip
    for key in ignored:
        output.note(f"whiteRemoteAddress of {key} is not migrated (no ACL 2.0 equivalent)")
    if rules.global_white_addresses:
        output.note("globalWhiteRemoteAddresses are not migrated (no ACL 2.0 equivalent)")

    async def action(admin: AdminClient) -> dict[str, list[str]]:
        brokers = broker or ()
        users = await admin_auth.list_users(admin, cluster=cluster, brokers=brokers)
        existing = {user["username"] for user in users}
        done: dict[str, list[str]] = {"created": [], "skipped": []}
        for key, account in sorted(rules.accounts.items()):
            if key in existing:
                done["skipped"].append(key)
                continue
            done["created"].append(key)
            if dry_run:
                continue
            user = user_of_account(account)
            await admin_auth.create_user(admin, user.username, user.password,
                                         user_type=user.user_type.value, cluster=cluster,
                                         brokers=brokers)  # fmt: skip
            acl_info = acl_of_account(account).to_object()
            await admin_auth.put_acl_info(admin, acl_info, cluster=cluster, brokers=brokers)
        return done

    done = command.run(action)
    if output.json_output:
        output.json({**done, "dryRun": dry_run})
        return
    verb = "would create" if dry_run else "created"
    output.line(f"{verb} {len(done['created'])} user(s): {', '.join(done['created']) or '-'}")
    output.line(f"left {len(done['skipped'])} existing: {', '.join(done['skipped']) or '-'}")

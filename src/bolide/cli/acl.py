"""``bolide acl list|version|update|delete|white-list``: the accounts of brokers with
``aclEnable=true`` (RocketMQ's ACL 1.0; mqadmin's updateAclConfig, deleteAclConfig,
clusterAclConfigVersion, updateGlobalWhiteAddr, getAclConfig). Every one needs an admin
account: ``--access-key/--secret-key`` or $BOLIDE_ACCESS_KEY/$BOLIDE_SECRET_KEY.
Changes go to every master (of ``--cluster``) or to the ``--broker``s named."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bolide.cli import users
from bolide.cli.common import (
    DEFAULT_NAMESRV,
    DEFAULT_TIMEOUT_MS,
    BrokerOption,
    ClusterOption,
    JsonOption,
    NamesrvOption,
    Output,
    TimeoutOption,
    admin_session,
    report_brokers,
)
from bolide.client.admin import AdminClient
from bolide.client.admin import acl as admin_acl
from bolide.protocol.headers.acl import AclInfoResponseHeader

__all__ = ["register"]

app = typer.Typer(help="ACL accounts and white lists of brokers (admin only).",
                  no_args_is_help=True)  # fmt: skip


def register(root: typer.Typer) -> None:
    """Add the ``acl`` group (with ACL 2.0's ``acl policy``) and ``user`` to ``root``."""
    app.add_typer(users.policy_app, name="policy")
    root.add_typer(app, name="acl")
    users.register(root)


@app.command("list")
def list_accounts(
    show_secrets: Annotated[
        bool, typer.Option("--show-secrets", help="Print secret keys too.")
    ] = False,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """The accounts and the global white list of each broker."""
    output = Output(json_output)

    async def action(admin: AdminClient) -> dict[str, admin_acl.BrokerAclConfig]:
        return await admin_acl.acl_config(admin, cluster=cluster, brokers=broker or ())

    configs = admin_session(output, namesrv, timeout_ms, action)
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
def version(
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """The data version of each broker's accounts file (it moves with every change)."""
    output = Output(json_output)

    async def action(admin: AdminClient) -> dict[str, AclInfoResponseHeader]:
        return await admin_acl.acl_info(admin, cluster=cluster, brokers=broker or ())

    infos = admin_session(output, namesrv, timeout_ms, action)
    rows = [[name, i.broker_addr, i.cluster_name, i.version] for name, i in infos.items()]
    if output.json_output:
        output.json({row[0]: {"brokerAddr": row[1], "clusterName": row[2], "version": row[3]}
                     for row in rows})  # fmt: skip
        return
    output.table(None, ["broker", "address", "cluster", "version"], rows)


@app.command("update")
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
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Create an account or change it (options left out keep their value)."""
    output = Output(json_output)
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

    async def action(admin: AdminClient) -> list[str]:
        return await admin_acl.update_acl_account(
            admin, change, cluster=cluster, brokers=broker or ()
        )

    brokers = admin_session(output, namesrv, timeout_ms, action)
    report_brokers(output, "account", access_key, brokers, "updated on")


@app.command("delete")
def delete(
    access_key: Annotated[str, typer.Argument(help="The account's access key.")],
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Delete an account."""
    output = Output(json_output)

    async def action(admin: AdminClient) -> list[str]:
        return await admin_acl.delete_acl_account(
            admin, access_key, cluster=cluster, brokers=broker or ()
        )

    brokers = admin_session(output, namesrv, timeout_ms, action)
    report_brokers(output, "account", access_key, brokers, "deleted on")


@app.command("white-list")
def white_list(
    patterns: Annotated[
        list[str] | None,
        typer.Argument(help="Address patterns (10.0.0.*, 192.168.1.10-20...); none: empty."),
    ] = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Replace the global white list (peers matching it skip every ACL check)."""
    output = Output(json_output)
    chosen = patterns or []

    async def action(admin: AdminClient) -> list[str]:
        return await admin_acl.update_global_white_addresses(
            admin, chosen, cluster=cluster, brokers=broker or ()
        )

    brokers = admin_session(output, namesrv, timeout_ms, action)
    report_brokers(output, "globalWhiteAddrs", ",".join(chosen), brokers, "set on")

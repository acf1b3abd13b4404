"""``bolide user create|update|delete|get|list`` and ``bolide acl policy
create|update|delete|get|list``: ACL 2.0's users and policies on brokers with
``authenticationEnabled`` / ``authorizationEnabled`` (RocketMQ 5.3; mqadmin's createUser,
updateUser, deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl).
Sign with a Super user: ``--access-key USER --secret-key PASSWORD`` (or the variables).
Changes go to every master (of ``--cluster``) or to the ``--broker``s named."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

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
from bolide.client.admin import auth as admin_auth

__all__ = ["policy_app", "register"]

app = typer.Typer(help="ACL 2.0 users of brokers (Super user only).", no_args_is_help=True)
policy_app = typer.Typer(help="ACL 2.0 policies of users (Super user only).", no_args_is_help=True)

UserArgument = Annotated[str, typer.Argument(help="The user name.")]
ResourceOption = Annotated[
    list[str], typer.Option("--resource", "-r", help="Topic:x, Topic:x*, Group:g, Cluster, *.")
]
ActionsOption = Annotated[
    str, typer.Option("--actions", "-a", help="Comma-separated: Pub,Sub,Get,Update,...,All.")
]
SourceIpOption = Annotated[
    list[str] | None, typer.Option("--source-ip", help="An address or CIDR; repeatable.")
]
DecisionOption = Annotated[str, typer.Option("--decision", help="Allow or Deny.")]
PolicyTypeOption = Annotated[str, typer.Option("--policy-type", help="Custom or Default.")]


def register(root: typer.Typer) -> None:
    """Add the ``user`` group to ``root`` (``acl policy`` is added by the acl module)."""
    root.add_typer(app, name="user")


def _run(
    json_output: bool,
    namesrv: str,
    timeout_ms: int,
    action: Callable[[AdminClient], Awaitable[Any]],
) -> tuple[Output, Any]:
    output = Output(json_output)
    return output, admin_session(output, namesrv, timeout_ms, action)


@app.command("create")
def create_user(
    username: UserArgument,
    password: Annotated[str, typer.Option("--password", help="The user's password (secret).")],
    super_user: Annotated[bool, typer.Option("--super", help="A Super user.")] = False,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Create a user (Normal unless --super)."""
    kind = "Super" if super_user else "Normal"

    async def action(admin: AdminClient) -> list[str]:
        return await admin_auth.create_user(
            admin, username, password, user_type=kind, cluster=cluster, brokers=broker or ()
        )

    output, brokers = _run(json_output, namesrv, timeout_ms, action)
    report_brokers(output, "user", username, brokers, "created on")


@app.command("update")
def update_user(
    username: UserArgument,
    password: Annotated[str | None, typer.Option("--password", help="A new password.")] = None,
    user_type: Annotated[str | None, typer.Option("--type", help="Super or Normal.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="enable or disable.")] = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Change a user's password, type or status (what is not given stays)."""

    async def action(admin: AdminClient) -> list[str]:
        return await admin_auth.update_user(
            admin, username, password=password, user_type=user_type, status=status,
            cluster=cluster, brokers=broker or (),
        )  # fmt: skip

    output, brokers = _run(json_output, namesrv, timeout_ms, action)
    report_brokers(output, "user", username, brokers, "updated on")


@app.command("delete")
def delete_user(
    username: UserArgument,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Delete a user and its policies."""

    async def action(admin: AdminClient) -> list[str]:
        return await admin_auth.delete_user(admin, username, cluster=cluster, brokers=broker or ())

    output, brokers = _run(json_output, namesrv, timeout_ms, action)
    report_brokers(output, "user", username, brokers, "deleted on")


@app.command("get")
def get_user(
    username: UserArgument,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """One user (its password is never shown)."""

    async def action(admin: AdminClient) -> dict[str, Any]:
        return await admin_auth.get_user(admin, username, cluster=cluster, brokers=broker or ())

    output, user = _run(json_output, namesrv, timeout_ms, action)
    _users(output, [user])


@app.command("list")
def list_users(
    name_filter: Annotated[str, typer.Option("--filter", help="Part of the name.")] = "",
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """The users (whose name contains --filter)."""

    async def action(admin: AdminClient) -> list[dict[str, Any]]:
        return await admin_auth.list_users(
            admin, name_filter, cluster=cluster, brokers=broker or ()
        )

    output, users = _run(json_output, namesrv, timeout_ms, action)
    _users(output, users)


def _users(output: Output, users: list[dict[str, Any]]) -> None:
    if output.json_output:
        output.json(users)
        return
    rows = [[u.get("username"), u.get("userType"), u.get("userStatus")] for u in users]
    output.table(None, ["user", "type", "status"], rows)


def _entries(
    resources: list[str], actions: str, source_ips: list[str] | None, decision: str
) -> list[dict[str, Any]]:
    names = [part.strip() for part in actions.split(",") if part.strip()]
    if not resources or not names:
        raise typer.BadParameter("give at least one --resource and one action in --actions")
    return [
        admin_auth.acl_entry(resource, names, source_ips=source_ips or (), decision=decision)
        for resource in resources
    ]


def _write_policy(
    write: Callable[..., Awaitable[list[str]]],
    verb: str,
    username: str,
    entries: list[dict[str, Any]],
    policy_type: str,
    cluster: str | None,
    broker: list[str] | None,
    namesrv: str,
    timeout_ms: int,
    json_output: bool,
) -> None:
    """Create or update (``write``) a user's ACL entries on the brokers and report where."""

    async def action(admin: AdminClient) -> list[str]:
        return await write(
            admin, username, entries, policy_type=policy_type, cluster=cluster,
            brokers=broker or (),
        )  # fmt: skip

    output, brokers = _run(json_output, namesrv, timeout_ms, action)
    report_brokers(output, "acl", f"User:{username}", brokers, verb)


@policy_app.command("create")
def create_policy(
    username: UserArgument,
    resource: ResourceOption,
    actions: ActionsOption,
    source_ip: SourceIpOption = None,
    decision: DecisionOption = "Allow",
    policy_type: PolicyTypeOption = "Custom",
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Create a user's ACL with one entry per --resource."""
    entries = _entries(resource, actions, source_ip, decision)
    _write_policy(
        admin_auth.create_acl, "created on", username, entries, policy_type, cluster, broker,
        namesrv, timeout_ms, json_output,
    )  # fmt: skip


@policy_app.command("update")
def update_policy(
    username: UserArgument,
    resource: ResourceOption,
    actions: ActionsOption,
    source_ip: SourceIpOption = None,
    decision: DecisionOption = "Allow",
    policy_type: PolicyTypeOption = "Custom",
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Add or replace entries of a user's ACL (by resource)."""
    entries = _entries(resource, actions, source_ip, decision)
    _write_policy(
        admin_auth.update_acl, "updated on", username, entries, policy_type, cluster, broker,
        namesrv, timeout_ms, json_output,
    )  # fmt: skip


@policy_app.command("delete")
def delete_policy(
    username: UserArgument,
    resource: Annotated[
        str | None, typer.Option("--resource", "-r", help="Only this resource's entries.")
    ] = None,
    policy_type: Annotated[
        str | None, typer.Option("--policy-type", help="Only this policy (Custom, Default).")
    ] = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """Delete a user's ACL, or some of its entries."""

    async def action(admin: AdminClient) -> list[str]:
        return await admin_auth.delete_acl(
            admin, username, policy_type=policy_type, resource=resource, cluster=cluster,
            brokers=broker or (),
        )  # fmt: skip

    output, brokers = _run(json_output, namesrv, timeout_ms, action)
    report_brokers(output, "acl", f"User:{username}", brokers, "deleted on")


@policy_app.command("get")
def get_policy(
    username: UserArgument,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """A user's ACL."""

    async def action(admin: AdminClient) -> dict[str, Any]:
        return await admin_auth.get_acl(admin, username, cluster=cluster, brokers=broker or ())

    output, acl = _run(json_output, namesrv, timeout_ms, action)
    _acls(output, [acl])


@policy_app.command("list")
def list_policies(
    subject_filter: Annotated[str, typer.Option("--subject", help="Part of the subject.")] = "",
    resource_filter: Annotated[
        str, typer.Option("--resource", help="Part of an entry's resource.")
    ] = "",
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    namesrv: NamesrvOption = DEFAULT_NAMESRV,
    timeout_ms: TimeoutOption = DEFAULT_TIMEOUT_MS,
    json_output: JsonOption = False,
) -> None:
    """The ACLs (filtered by subject and resource)."""

    async def action(admin: AdminClient) -> list[dict[str, Any]]:
        return await admin_auth.list_acls(
            admin, subject_filter, resource_filter, cluster=cluster, brokers=broker or ()
        )

    output, acls = _run(json_output, namesrv, timeout_ms, action)
    _acls(output, acls)


def _acls(output: Output, acls: list[dict[str, Any]]) -> None:
    if output.json_output:
        output.json(acls)
        return
    rows = [
        [acl.get("subject"), policy.get("policyType"), entry.get("resource"),
         ",".join(entry.get("actions") or []), ",".join(entry.get("sourceIps") or []) or "-",
         entry.get("decision")]
        for acl in acls
        for policy in acl.get("policies") or []
        for entry in policy.get("entries") or []
    ]  # fmt: skip
    output.table(None, ["subject", "policy", "resource", "actions", "source IPs", "decision"], rows)

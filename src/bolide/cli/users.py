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

from bolide.cli.common import AdminCommand, BrokerOption, ClusterOption, Output, admin_options
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


@app.command("create")
@admin_options
def create_user(
    username: UserArgument,
    password: Annotated[str, typer.Option("--password", help="The user's password (secret).")],
    super_user: Annotated[bool, typer.Option("--super", help="A Super user.")] = False,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Create a user (Normal unless --super)."""
    kind = "Super" if super_user else "Normal"
    command.change_brokers(
        lambda admin: admin_auth.create_user(
            admin, username, password, user_type=kind, cluster=cluster, brokers=broker or ()
        ),
        "user", username, "created on",
    )  # fmt: skip


@app.command("update")
@admin_options
def update_user(
    username: UserArgument,
    password: Annotated[str | None, typer.Option("--password", help="A new password.")] = None,
    user_type: Annotated[str | None, typer.Option("--type", help="Super or Normal.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="enable or disable.")] = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Change a user's password, type or status (what is not given stays)."""
    command.change_brokers(
        lambda admin: admin_auth.update_user(
            admin, username, password=password, user_type=user_type, status=status,
            cluster=cluster, brokers=broker or (),
        ),
        "user", username, "updated on",
    )  # fmt: skip


@app.command("delete")
@admin_options
def delete_user(
    username: UserArgument,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Delete a user and its policies."""
    command.change_brokers(
        lambda admin: admin_auth.delete_user(
            admin, username, cluster=cluster, brokers=broker or ()
        ),
        "user", username, "deleted on",
    )  # fmt: skip


@app.command("get")
@admin_options
def get_user(
    username: UserArgument,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """One user (its password is never shown)."""
    user = command.run(
        lambda admin: admin_auth.get_user(admin, username, cluster=cluster, brokers=broker or ())
    )
    _users(command.output, [user])


@app.command("list")
@admin_options
def list_users(
    name_filter: Annotated[str, typer.Option("--filter", help="Part of the name.")] = "",
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """The users (whose name contains --filter)."""
    users = command.run(
        lambda admin: admin_auth.list_users(
            admin, name_filter, cluster=cluster, brokers=broker or ()
        )
    )
    _users(command.output, users)


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


def _policy_writer(
    write: Callable[..., Awaitable[list[str]]], verb: str, help_text: str
) -> Callable[..., None]:
    """The ``acl policy create`` or ``update`` command: ``write`` a user's ACL entries (one per
    --resource) on the brokers and report where (``verb``)."""

    @admin_options
    def write_policy(
        username: UserArgument,
        resource: ResourceOption,
        actions: ActionsOption,
        source_ip: SourceIpOption = None,
        decision: DecisionOption = "Allow",
        policy_type: PolicyTypeOption = "Custom",
        cluster: ClusterOption = None,
        broker: BrokerOption = None,
        *,
        command: AdminCommand,
    ) -> None:
        entries = _entries(resource, actions, source_ip, decision)
        command.change_brokers(
            lambda admin: write(
                admin, username, entries, policy_type=policy_type, cluster=cluster,
                brokers=broker or (),
            ),
            "acl", f"User:{username}", verb,
        )  # fmt: skip

    write_policy.__doc__ = help_text
    return write_policy


policy_app.command("create")(
    _policy_writer(
        admin_auth.create_acl, "created on", "Create a user's ACL with one entry per --resource."
    )
)
policy_app.command("update")(
    _policy_writer(
        admin_auth.update_acl, "updated on", "Add or replace entries of a user's ACL (by resource)."
    )
)


@policy_app.command("delete")
@admin_options
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
    *,
    command: AdminCommand,
) -> None:
    """Delete a user's ACL, or some of its entries."""
    command.change_brokers(
        lambda admin: admin_auth.delete_acl(
            admin, username, policy_type=policy_type, resource=resource, cluster=cluster,
            brokers=broker or (),
        ),
        "acl", f"User:{username}", "deleted on",
    )  # fmt: skip


@policy_app.command("get")
@admin_options
def get_policy(
    username: UserArgument,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """A user's ACL."""
    acl = command.run(
        lambda admin: admin_auth.get_acl(admin, username, cluster=cluster, brokers=broker or ())
    )
    _acls(command.output, [acl])


@policy_app.command("list")
@admin_options
def list_policies(
    subject_filter: Annotated[str, typer.Option("--subject", help="Part of the subject.")] = "",
    resource_filter: Annotated[
        str, typer.Option("--resource", help="Part of an entry's resource.")
    ] = "",
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """The ACLs (filtered by subject and resource)."""
    acls = command.run(
        lambda admin: admin_auth.list_acls(
            admin, subject_filter, resource_filter, cluster=cluster, brokers=broker or ()
        )
    )
    _acls(command.output, acls)


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

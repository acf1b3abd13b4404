"""The Bolide web dashboard: an ASGI application (Starlette, server-rendered Jinja2 pages,
assets inside the package) over :class:`bolide.client.admin.AdminClient`.

``bolide dashboard --namesrv H:P`` runs it alone; ``bolide standalone`` runs it beside the
name server and broker (``--dashboard-port``, default 8080; ``--no-dashboard``). Pages:
cluster (live TPS), topics, consumer groups (lag, members, reset with preview, clone),
messages, dead letters (browse, resend, export), delay backlog, producers. See
docs/operations.md.
"""

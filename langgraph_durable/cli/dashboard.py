"""``langgraph-durable dashboard``: the operations dashboard in a browser (the
``dashboard`` extra: starlette, uvicorn, jinja2)."""

from __future__ import annotations

import typer

from .session import CliError, command, session_of


@command
def dashboard(ctx: typer.Context,
              host: str = typer.Option("127.0.0.1", "--host",
                                       help="address to bind; other than loopback needs a "
                                       "token"),
              port: int = typer.Option(8765, "--port", min=0, max=65535, help="TCP port"),
              token: str = typer.Option(None, "--token", envvar="LGD_DASHBOARD_TOKEN",
                                        help="required from every browser (?token= once); "
                                        "env LGD_DASHBOARD_TOKEN"),
              allow_writes: bool = typer.Option(False, "--allow-writes",
                                                help="enable the time machine (fork) and, "
                                                "with --graph, actions; makes a token "
                                                "when none is given"),
              allowed_host: list[str] = typer.Option(  # noqa: B008
                  [], "--allowed-host",
                  help="a Host name browsers reach the dashboard by, besides localhost, "
                  "127.0.0.1, [::1] and the address bound (repeatable; *.example.com for "
                  "subdomains); other names get 400 (DNS rebinding)"),
              state_version: int = typer.Option(
                  None, "--state-version", metavar="N", min=1,
                  help="the application's current state version: count the threads "
                  "that need migration (older than N) and those newer"),
              graph: list[str] = typer.Option(  # noqa: B008
                  [], "--graph", metavar="NAME=MODULE:ATTR",
                  help="a compiled graph (or a function returning one) to act with: "
                  "answer interrupts, retry, run forks (with --allow-writes; "
                  "repeatable)")) -> None:
    """Serve the operations dashboard: threads (live), a thread's timeline, state and
    diffs, the time machine, the tiers. Read-only unless --allow-writes. Values are
    decoded strictly: a type outside the allowlist (--allow-type adds to it) shows as
    <not decoded: module.Name (...)>, never imported nor run. Each thread's state
    version is shown; with --state-version N, how many need migration. With
    --allow-writes and --graph, the thread page answers interrupts, retries and runs
    threads (each action in the audit log)."""
    try:
        from ..dashboard import app as dashboard_app
        from ..dashboard import security
    except ImportError as exc:
        raise CliError("the dashboard needs the dashboard extra (pip install "
                       f"'langgraph-durable[dashboard]'): {exc}") from None
    made = allow_writes and not token
    if made:
        token = security.new_token()
    security.check_bind(host, token, allow_writes)  # before connecting to anything
    security.allowed_host_names(allowed_host)
    from ..inspection import graph_actions as actions

    try:
        graphs = actions.parse_graphs(graph)  # operator-named code, imported before serving
    except actions.ActionError as exc:
        raise CliError(str(exc)) from None
    session = session_of(ctx)
    saver = session.saver(flusher=True) if allow_writes else session.saver(tolerant=True)
    shown = "[::1]" if host == "::1" else host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if made else "")
    typer.echo(f"dashboard on {url} ({'writes allowed' if allow_writes else 'read-only'}; "
               "Ctrl-C stops it)", err=True)
    if security.bound_host(host) is None and not security.is_loopback(host) \
            and not allowed_host:
        typer.echo(f"note: {dashboard_app.wildcard_note(host)}", err=True)
    dashboard_app.serve(saver, host=host, port=port, token=token, allow_writes=allow_writes,
                        allowed_hosts=allowed_host, allow_types=session.allow_types,
                        warn_wildcard=False, state_version=state_version, graphs=graphs)

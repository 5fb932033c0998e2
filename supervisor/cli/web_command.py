"""`supervisor web`: parses its options and hands them to the dashboard's server
(supervisor/web/serve.py); `supervisor web token ...` manages team members' personal sign-in
tokens (supervisor/cli/web_tokens.py).

The web stack is imported when the command runs, so no other command waits for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from supervisor.cli.common import RepoOption
from supervisor.cli.web_tokens import token_app

WEB_HELP = (
    "Serve a dashboard of every task in a browser: a live board, each workflow's tree, events "
    "and diff, and approvals. Loopback only unless --host is given. Its first line is the "
    "address to open; `web token` makes personal sign-in tokens for a team."
)

web_app = typer.Typer(help=WEB_HELP, invoke_without_command=True)
web_app.add_typer(token_app, name="token")


@web_app.callback()
def web(
    ctx: typer.Context,
    repo: RepoOption = Path(),
    host: Annotated[
        str,
        typer.Option(
            "--host", metavar="NAME", help="The address to listen on, and the only name answered."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="N", help="The port (0: a free one).")
    ] = 8765,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the address; do not open a browser.")
    ] = False,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", metavar="PEM", help="Serve HTTPS with this.")
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", metavar="PEM", help="The certificate's key.")
    ] = None,
    insecure_http: Annotated[
        bool,
        typer.Option("--insecure-http", help="Allow plain HTTP on a non-loopback --host."),
    ] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from supervisor.web.serve import Options, serve

    serve(
        Options(
            repo=repo,
            host=host,
            port=port,
            open_browser=not no_open,
            tls_cert=tls_cert,
            tls_key=tls_key,
            insecure_http=insecure_http,
        )
    )

"""`perfgym serve`: the gym as an HTTP reward service."""
from __future__ import annotations

from typing import Optional

import typer

from .. import machine as machine_mod
from .common import UserError, _guard, app, err_console


@app.command("serve")
@_guard
def serve_cmd(host: str = typer.Option("127.0.0.1", help="address to bind (localhost by "
                                       "default; 0.0.0.0 to serve other machines)"),
              port: int = typer.Option(8000),
              token: Optional[str] = typer.Option(None, envvar="PERFGYM_TOKEN",
                                                  help="bearer token (default: $PERFGYM_TOKEN, "
                                                  "else a new random one, printed)"),
              no_auth: bool = typer.Option(False, "--no-auth", help="serve without a token "
                                           "(only sensible on localhost)"),
              max_batch: int = typer.Option(64, help="candidates per request"),
              max_body: int = typer.Option(4 << 20, help="bytes per request"),
              ray_address: Optional[str] = typer.Option(
                  None, envvar="PERFGYM_RAY_ADDRESS",
                  help="evaluate on this Ray cluster's benchmark nodes (HEAD:PORT, or auto "
                  "for the cluster this machine belongs to; default: this machine)")) -> None:
    """Serve the gym over HTTP: POST /evaluate, POST /openrlhf, GET /tasks, GET /health,
    /openapi.json."""
    import secrets as _secrets
    try:
        from ..serve import serve
    except ImportError as exc:
        if (exc.name or "").startswith("perfgym"):  # our own bug, not a missing extra
            raise
        raise UserError("the service needs the serve extra: pip install 'perfgym[serve]'")
    if not (1 <= port <= 65535 and max_batch >= 1 and max_body >= 1):
        raise UserError("--port is 1-65535, --max-batch and --max-body at least 1")
    _check_bind(host, port)
    if no_auth:
        token = None
    elif not token:
        token = _secrets.token_urlsafe(24)
        err_console.print(f"token: {token}  (send 'Authorization: Bearer <token>'; set "
                          "PERFGYM_TOKEN to choose it)", highlight=False, soft_wrap=True)
    if ray_address:  # the benchmark nodes measure their own machine
        _check_cluster(ray_address)
    else:
        machine_mod.machine_info()  # measure before the first request, not during it
    serve(host, port, token, max_batch, max_body, ray_address=ray_address)


def _check_cluster(address: str) -> None:
    """Join the cluster now, so a wrong address or a cluster without benchmark nodes is one
    line at start rather than a failed reward later."""
    try:
        from ..integrations import executor_for
        executor = executor_for(address)
        runner = executor.__self__  # the RayExecutor whose evaluate_many it is
        runner.bench_machine()
    except RuntimeError as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    except ConnectionError as exc:
        raise UserError(f"cannot reach the Ray cluster at {address}: {exc}") from None


def _check_bind(host: str, port: int) -> None:
    """Bind once before starting the server, so an unknown host or a busy port is one line."""
    import socket
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            s.bind(address)
    except OSError as exc:
        raise UserError(f"cannot serve on {host}:{port} ({exc.strerror or exc}): choose another "
                        "--host or --port") from None

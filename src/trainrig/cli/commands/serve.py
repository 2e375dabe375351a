"""`trainrig serve`: the planner in the browser — a page and a JSON API over the same functions as the CLI."""

from __future__ import annotations

import importlib.util
import ipaddress
import math

import typer
from rich.markup import escape

from trainrig.cli.common import err_console
from trainrig.errors import TrainrigError

WEB_MODULES = ("fastapi", "uvicorn")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; 0.0.0.0 exposes the server to the network."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    plan_timeout_s: float = typer.Option(30.0, "--plan-timeout-s", help="Time limit of one plan or compare search."),
    max_parallel_plans: int = typer.Option(2, "--max-parallel-plans", help="Plan searches running at once."),
    request_timeout_s: float = typer.Option(10.0, "--request-timeout-s",
                                            help="Time limit of one estimate, fit, node or model request."),
) -> None:
    """Serve the planner page and its JSON API (/api/…, schema at /openapi.json)."""
    missing = [name for name in WEB_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        message = (f"trainrig serve needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                   "not installed; install the web extra with: pip install 'trainrig[web]'")
        err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2)
    _check(port, plan_timeout_s, max_parallel_plans, request_timeout_s)
    from trainrig.web.app import create_app
    from trainrig.web.server import bound_socket, uvicorn_server
    from trainrig.web.settings import Settings

    listening = bound_socket(host, port)  # first: a busy port is one sentence and exit 2, before any start-up
    settings = Settings(plan_timeout_s=plan_timeout_s, max_parallel_plans=max_parallel_plans,
                        request_timeout_s=request_timeout_s)
    app = create_app(settings, allowed_hosts=_allowed_hosts(host))
    shown = f"[{host}]" if ":" in host else host
    err_console.print(f"trainrig serving on http://{shown}:{port}/ (Ctrl+C stops it)", highlight=False)
    uvicorn_server(app, settings).run(sockets=[listening])


def _check(port: int, plan_timeout_s: float, max_parallel_plans: int, request_timeout_s: float) -> None:
    if not 0 < port < 65536:
        raise TrainrigError("port", f"must be between 1 and 65535 (got {port}).")
    for option, seconds in (("plan_timeout_s", plan_timeout_s), ("request_timeout_s", request_timeout_s)):
        if not 0 < seconds < math.inf:  # NaN fails this too
            raise TrainrigError(option, f"must be a positive, finite number of seconds (got {seconds:g}).")
    if max_parallel_plans < 1:
        raise TrainrigError("max_parallel_plans", f"must be at least 1 (got {max_parallel_plans}).")


def _allowed_hosts(host: str) -> tuple[str, ...] | None:
    """On loopback, only requests addressed to the loopback names (no DNS rebinding); else any."""
    if host in LOOPBACK_HOSTS or _is_loopback(host):
        return ("127.0.0.1", "localhost", "[::1]", host)
    return None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)

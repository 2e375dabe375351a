"""`trainrig serve`: the planner in the browser — a page and a JSON API over the same functions as the CLI."""

from __future__ import annotations

import importlib.util
import ipaddress

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
) -> None:
    """Serve the planner page and its JSON API (/api/…, schema at /openapi.json)."""
    missing = [name for name in WEB_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        message = (f"trainrig serve needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                   "not installed; install the web extra with: pip install 'trainrig[web]'")
        err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2)
    _check(port, plan_timeout_s, max_parallel_plans)
    import uvicorn

    from trainrig.web.app import create_app
    from trainrig.web.settings import Settings

    settings = Settings(plan_timeout_s=plan_timeout_s, max_parallel_plans=max_parallel_plans)
    app = create_app(settings, allowed_hosts=_allowed_hosts(host))
    shown = f"[{host}]" if ":" in host else host
    err_console.print(f"trainrig serving on http://{shown}:{port}/ (Ctrl+C stops it)", highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _check(port: int, plan_timeout_s: float, max_parallel_plans: int) -> None:
    if not 0 < port < 65536:
        raise TrainrigError("port", f"must be between 1 and 65535 (got {port}).")
    if not plan_timeout_s > 0:
        raise TrainrigError("plan_timeout_s", f"must be a positive number of seconds (got {plan_timeout_s:g}).")
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

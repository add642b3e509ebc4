"""``l3p serve``: its entry point (the options are `ServeConfig`'s, in serving/config.py)."""

from __future__ import annotations

from l3p.core.commandline import parse_config
from l3p.core.errors import L3PError
from l3p.serving.config import ServeConfig
from l3p.serving.logs import configure_logging
from l3p.serving.processes import run_processes
from l3p.serving.server import serve
from l3p.serving.startup import prepare, report


def run_serve(config: ServeConfig) -> int:
    """Serves until SIGTERM/SIGINT; the exit code. A server that cannot start raises an L3PError
    (bundle, security settings, busy port)."""
    # With --processes N each process captures its own native messages; the parent runs no gRPC
    # server, and its children must inherit the real stderr, not a pipe of the parent's.
    configure_logging(config.log_level, capture_native=config.processes == 1, log_format=config.log_format)
    prepared = prepare(config)
    if config.processes > 1:
        return run_processes(config)
    return serve(config, *prepared,
                 on_ready=lambda port: print(f"L3P_SERVER_READY port={port}", flush=True))


def main(argv: list[str] | None = None) -> int:
    try:
        return run_serve(parse_config(ServeConfig, argv, prog="python -m l3p.serving",
                                      description="Serve L3P model bundles over gRPC (the stateful planner)."))
    except L3PError as exc:
        return report(exc)

"""``l3p serve``: its command-line arguments and its entry point."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from l3p.core.errors import L3PError
from l3p.serving.logs import configure_logging
from l3p.serving.processes import run_processes
from l3p.serving.repository import MODEL_NAME
from l3p.serving.security import add_security_arguments
from l3p.serving.server import serve
from l3p.serving.startup import prepare, report

# Max queue delay of the cross-session batcher (--batch-delay-us), chosen with
# benchmarks/serve_latency.py: see README's serving table.
DEFAULT_BATCH_DELAY_US = 0
# How often the model repository is looked at for new versions: reading each model's manifest
# (a few kB) costs well under a millisecond.
DEFAULT_POLL_INTERVAL_S = 5.0


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in [0, 65535], got {text}")
    return value


def _microseconds(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"expected microseconds in [0, 1000000], got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


def _sha256(text: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise argparse.ArgumentTypeError(f"expected 64 hex digits, got {text!r}")
    return text.lower()


def _replica_id(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9-]{1,32}", text):
        raise argparse.ArgumentTypeError(f"expected 1-32 of A-Z a-z 0-9 -, got {text!r}")
    return text


def _model_pin(text: str) -> tuple[str, str]:
    name, sep, digest = text.partition("=")
    if not sep or not MODEL_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"expected NAME=HEX (a model name, 64 hex digits), got {text!r}")
    return name, _sha256(digest)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--models", type=Path, metavar="DIR",
                      help="model repository: serve every bundle DIR/NAME/ (or the newest "
                           "DIR/NAME/VERSION/) as model NAME")
    what.add_argument("--bundle", type=Path, help="one model bundle directory (a repository of one "
                                                   "model, named after the directory)")
    parser.add_argument("--default-model", metavar="NAME",
                        help="the model of requests that name none (default: the first name in "
                             "sorted order)")
    parser.add_argument("--model-sha256", type=_model_pin, action="append", default=[],
                        metavar="NAME=HEX",
                        help="serve model NAME only with this digest; repeat to allow several "
                             "(e.g. the next version's); checked before a graph is opened")
    parser.add_argument("--poll-interval", type=float, default=DEFAULT_POLL_INTERVAL_S,
                        metavar="SECONDS",
                        help="look for new model versions this often and swap them in under live "
                             f"episodes (default {DEFAULT_POLL_INTERVAL_S:g}; 0: only on ReloadModels)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; 0.0.0.0 exposes the server)")
    parser.add_argument("--port", type=_port, default=50051,
                        help="gRPC port (default 50051; 0 picks a free one, printed as "
                             "'L3P_SERVER_READY port=N')")
    parser.add_argument("--session-ttl", type=_seconds, default=300.0,
                        help="seconds an idle episode is kept (default 300)")
    parser.add_argument("--max-sessions", type=_count, default=1024,
                        help="live episodes at most; more answer RESOURCE_EXHAUSTED (default 1024)")
    parser.add_argument("--max-sessions-per-principal", type=_count, default=None, metavar="N",
                        help="live episodes one caller (token or client certificate) may hold; "
                             "default: a quarter of --max-sessions when callers authenticate, "
                             "else only --max-sessions applies")
    parser.add_argument("--batch-delay-us", type=_microseconds, default=DEFAULT_BATCH_DELAY_US,
                        help="max queue delay: how long the first step of a batch waits for the "
                             "steps of other sessions to share its onnxruntime call (default "
                             f"{DEFAULT_BATCH_DELAY_US}; steps that arrive while a call runs are "
                             "batched whatever this is)")
    parser.add_argument("--shutdown-grace", type=_seconds, default=10.0,
                        help="seconds calls in flight may take to finish on SIGTERM (default 10)")
    parser.add_argument("--log-level", default="info",
                        choices=("debug", "info", "warning", "error"), help="default info")
    parser.add_argument("--exit-with-parent", type=int, metavar="PID", default=None,
                        help="shut down (as on SIGTERM) when process PID, the supervisor that "
                             "started this server, exits (Linux)")
    parser.add_argument("--metrics-port", type=_port, default=0,
                        help="serve Prometheus metrics at http://HOST:PORT/metrics (default 0: off; "
                             "with --processes N, process i serves PORT+i)")
    add_security_arguments(parser)
    parser.add_argument("--reflection", action="store_true",
                        help="serve gRPC server reflection (lists the services; off by default)")
    parser.add_argument("--bundle-sha256", metavar="HEX", type=_sha256,
                        help="with --bundle: refuse to serve it unless its digest (printed by l3p "
                             "export, reported by GetModelInfo) is HEX")
    parser.add_argument("--processes", type=_count, default=1,
                        help="server processes sharing the port (SO_REUSEPORT; default 1); each "
                             "client connection, with its sessions, stays on one process")
    parser.add_argument("--replica-id", type=_replica_id, metavar="ID",
                        help="prefix session ids with 'ID.' so a proxy can send a session's unary "
                             "calls to this replica (deploy/nginx)")


def run_serve(args: argparse.Namespace) -> int:
    """Serves until SIGTERM/SIGINT; the exit code. A server that cannot start raises an L3PError
    (bundle, security settings, busy port)."""
    # With --processes N each process captures its own native messages; the parent runs no gRPC
    # server, and its children must inherit the real stderr, not a pipe of the parent's.
    configure_logging(args.log_level, capture_native=args.processes == 1)
    prepared = prepare(args)
    if args.processes > 1:
        return run_processes(args)
    return serve(args, *prepared,
                 on_ready=lambda port: print(f"L3P_SERVER_READY port={port}", flush=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m l3p.serving",
        description="Serve L3P model bundles over gRPC (the stateful planner).")
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_serve(args)
    except L3PError as exc:
        return report(exc)

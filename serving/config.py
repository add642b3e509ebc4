"""``l3p serve``'s config: every option of the server, its type, default and help, written once.

The command line (``l3p serve``, ``python -m l3p.serving``) and a config file (``l3p serve
--config serve.toml``; keys are the option names with ``_`` for ``-``) are both read into a
`ServeConfig`, which the server, its security settings and its processes take. Standard library
only, so ``l3p serve --help`` lists the options in every install profile.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

from l3p.core.bundle_format import DEFAULT_MAX_FILE_BYTES, MODEL_NAME
from l3p.core.commandline import option
from l3p.core.overrides import parse_pair
from l3p.serving.logs import LOG_FORMATS

# Max queue delay of the cross-session batcher (--batch-delay-us), chosen with
# benchmarks/serve_latency.py: see README's serving table.
DEFAULT_BATCH_DELAY_US = 0
# How often the model repository is looked at for new versions: reading each model's manifest
# (a few kB) costs well under a millisecond.
DEFAULT_POLL_INTERVAL_S = 5.0
# How long one look at the repository or one model load may take before it is reported as jammed
# and abandoned: a shipped bundle loads in about a second.
DEFAULT_LOAD_TIMEOUT_S = 60.0

SECURITY = "TLS and authentication"
OPENPI = "openpi-compatible websocket listener (docs/guides/openpi.md)"

# Where the planner's inputs are in an openpi observation dict, by default (--openpi-key ROLE=KEY).
OPENPI_KEYS = {"observation": "observation/state", "goal": "goal", "model": "model", "reset": "reset",
               "options": "options"}
# An observation is a few hundred bytes; the cap leaves room for the camera images that openpi
# observation dicts often carry beside it (ignored here), and bounds what one frame can make the
# server hold.
DEFAULT_OPENPI_MAX_FRAME_BYTES = 1 << 20


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


def _interval(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text}")
    return value


def _sha256(text: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise argparse.ArgumentTypeError(f"expected 64 hex digits, got {text!r}")
    return text.lower()


def _replica_id(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9-]{1,32}", text):
        raise argparse.ArgumentTypeError(f"expected 1-32 of A-Z a-z 0-9 -, got {text!r}")
    return text


def _openpi_key(text: str) -> tuple[str, str]:
    return _pair(text, _nonempty, keys=OPENPI_KEYS, form="ROLE=KEY")


def _model_pin(text: str) -> tuple[str, str]:
    name, digest = _pair(text, lambda name, digest: _sha256(digest), form="NAME=HEX")
    if not MODEL_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"expected NAME=HEX, NAME a model name (1-64 of A-Z a-z 0-9 _ . -, the "
                                         f"first a letter or digit), got {text!r}")
    return name, digest


def _pair(text: str, value, **how) -> tuple[str, str]:
    try:
        return parse_pair(text, value, **how)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _nonempty(key: str, text: str) -> str:
    if not text:
        raise ValueError("expected a key")
    return text


@dataclass(frozen=True)
class ServeConfig:
    """One server (or ``processes`` of them on one port). Exactly one of ``models`` / ``bundle``."""

    models: Path | None = option(None, "model repository: serve every bundle DIR/NAME/ (or the newest "
                                       "DIR/NAME/VERSION/) as model NAME", metavar="DIR")
    bundle: Path | None = option(None, "one model bundle directory (a repository of one model, named "
                                       "after the directory)", metavar="DIR")
    default_model: str | None = option(None, "the model of requests that name none (default: the first "
                                             "name in sorted order)", metavar="NAME")
    model_sha256: tuple[tuple[str, str], ...] = option(
        (), "serve model NAME only with this digest; repeat to allow several (e.g. the next version's); "
            "checked before a graph is opened", parse=_model_pin, metavar="NAME=HEX")
    poll_interval: float = option(DEFAULT_POLL_INTERVAL_S,
                                  "look for new model versions this often and swap them in under live "
                                  "episodes, seconds (0: only on ReloadModels)", parse=_interval,
                                  metavar="SECONDS")
    host: str = option("127.0.0.1", "address to bind (0.0.0.0 exposes the server)", metavar="HOST")
    port: int = option(50051, "gRPC port (0 picks a free one, printed as 'L3P_SERVER_READY port=N')",
                       parse=_port, metavar="PORT")
    session_ttl: float = option(300.0, "seconds an idle episode is kept", parse=_seconds, metavar="SECONDS")
    max_sessions: int = option(1024, "live episodes at most; more answer RESOURCE_EXHAUSTED", parse=_count,
                               metavar="N")
    max_sessions_per_principal: int | None = option(
        None, "live episodes one caller (token or client certificate) may hold; default: a quarter of "
              "--max-sessions when callers authenticate, else only --max-sessions applies", parse=_count,
        metavar="N")
    batch_delay_us: int = option(DEFAULT_BATCH_DELAY_US,
                                 "max queue delay: how long the first step of a batch waits for the steps "
                                 "of other sessions to share its onnxruntime call (steps that arrive while "
                                 "a call runs are batched whatever this is)", parse=_microseconds,
                                 metavar="US")
    shutdown_grace: float = option(10.0, "seconds calls in flight may take to finish on SIGTERM",
                                   parse=_seconds, metavar="SECONDS")
    log_level: str = option("info", "log level (debug adds a line per episode started, ended or expired)",
                            choices=("debug", "info", "warning", "error"))
    log_format: str | None = option(None, "text: a line per event for a person; json: a JSON object per line "
                                          "(for log shippers); default text on a terminal, json otherwise",
                                    choices=LOG_FORMATS)
    exit_with_parent: int | None = option(None, "shut down (as on SIGTERM) when process PID, the supervisor "
                                                "that started this server, exits (Linux)", metavar="PID")
    metrics_port: int = option(0, "serve Prometheus metrics at http://HOST:PORT/metrics (0: off; with "
                                  "--processes N, process i serves PORT+i)", parse=_port, metavar="PORT")
    tls_cert: Path | None = option(None, "serve TLS with this certificate (chain); needs --tls-key",
                                   metavar="PEM", group=SECURITY)
    tls_key: Path | None = option(None, "the certificate's private key", metavar="PEM", group=SECURITY)
    tls_client_ca: Path | None = option(None, "mutual TLS: clients must present a certificate signed by "
                                              "this CA; its common name becomes the caller's identity",
                                        metavar="PEM", group=SECURITY)
    auth_token_file: Path | None = option(None, "require 'authorization: Bearer <token>' on every Planner "
                                                "call; one token per line, 'token' or 'name:token' (health "
                                                "stays open for probes)", metavar="FILE", group=SECURITY)
    admin_token_file: Path | None = option(None, "tokens (same format) that may call ReloadModels, and only "
                                                 "that; without it nobody may (the repository watch still "
                                                 "swaps)", metavar="FILE", group=SECURITY)
    insecure: bool = option(False, "allow a non-loopback --host (or --metrics-host) without TLS (e.g. behind "
                                   "a proxy that terminates TLS on a private network); logs a warning",
                            group=SECURITY)
    metrics_host: str = option("127.0.0.1", "address /metrics binds, whatever --host is; served over TLS "
                                            "with --tls-cert/--tls-key when those are given", metavar="HOST",
                                 group=SECURITY)
    metrics_token_file: Path | None = option(None, "require 'Authorization: Bearer <token>' on /metrics "
                                                   "(token file format as --auth-token-file; a scraper's "
                                                   "own tokens)", metavar="FILE", group=SECURITY)
    reflection: bool = option(False, "serve gRPC server reflection (lists the services; off by default)")
    bundle_sha256: str | None = option(None, "with --bundle: refuse to serve it unless its digest (printed by "
                                             "l3p export, reported by GetModelInfo) is HEX", parse=_sha256,
                                       metavar="HEX")
    trusted_keys: Path | None = option(None, "serve only model versions signed by one of these Ed25519 keys "
                                             "(.pub lines from l3p keygen; l3p export --sign-key signs), "
                                             "checked at start and on every swap before a graph is opened",
                                       metavar="FILE")
    served_sequences: Path | None = option(
        None, "with --trusted-keys: the file that keeps the highest signature sequence served per model, so "
              "an older version is refused across restarts (l3p rollback --served-sequences FILE lowers it); "
              "outside the model repository (default $XDG_STATE_HOME/l3p/served-sequences.json)",
        metavar="FILE")
    max_file_bytes: int = option(DEFAULT_MAX_FILE_BYTES, "refuse a bundle with a graph file larger than this, "
                                                         "unread", parse=_count, metavar="BYTES")
    load_timeout: float = option(DEFAULT_LOAD_TIMEOUT_S, "a look at the model repository or a model load that "
                                                         "takes longer is reported as jammed and abandoned "
                                                         "(the current version keeps serving; at start, the "
                                                         "server does not start)", parse=_seconds,
                                 metavar="SECONDS")
    processes: int = option(1, "server processes sharing the port (SO_REUSEPORT); each client connection, "
                               "with its sessions, stays on one process", parse=_count, metavar="N")
    replica_id: str | None = option(None, "prefix session ids with 'ID.' so a proxy can send a session's "
                                          "unary calls to this replica (deploy/nginx)", parse=_replica_id,
                                    metavar="ID")
    openpi_port: int | None = option(None, "also serve openpi's websocket protocol (openpi-client's "
                                           "WebsocketClientPolicy) on this port, over the same models, "
                                           "sessions, tokens, TLS and limits (0 picks a free one, printed as "
                                           "'L3P_OPENPI_READY port=N')", parse=_port, metavar="PORT",
                                     group=OPENPI)
    openpi_key: tuple[tuple[str, str], ...] = option(
        (), "where ROLE is in an observation dict; repeat per role (defaults: "
            + ", ".join(f"{role}={key}" for role, key in OPENPI_KEYS.items()) + ")",
        parse=_openpi_key, metavar="ROLE=KEY", group=OPENPI)
    openpi_max_frame_bytes: int = option(DEFAULT_OPENPI_MAX_FRAME_BYTES,
                                         "close an openpi connection that sends a larger frame (code 1009)",
                                         parse=_count, metavar="BYTES", group=OPENPI)
    openpi_idle_timeout: float = option(60.0, "close an openpi connection that sends no frame for this long "
                                              "from its handshake on, seconds (close 1000, the reason names "
                                              "this flag)", parse=_seconds, metavar="SECONDS", group=OPENPI)

    def __post_init__(self) -> None:
        if (self.models is None) == (self.bundle is None):
            raise ValueError("give --models DIR or --bundle DIR" if self.models is None else
                             "--models and --bundle exclude each other: give one")
        last = self.metrics_port + self.processes - 1
        if self.metrics_port and last > 65535:
            raise ValueError(f"--metrics-port {self.metrics_port} with --processes {self.processes} needs ports "
                             f"{self.metrics_port}-{last} (process i serves PORT+i), past 65535: choose a "
                             f"--metrics-port <= {65536 - self.processes}")

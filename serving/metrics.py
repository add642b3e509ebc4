"""Prometheus metrics of the planner server, in a registry of their own (scraped at /metrics).

/metrics listens on its own address (``--metrics-host``, loopback by default), over TLS when the
server has a certificate (the same one), and with ``--metrics-token-file`` only for a scraper that
sends ``Authorization: Bearer <token>`` (compared in constant time, as for the planner). Anything
but ``GET /metrics`` is answered 404; a slow client is dropped after METRICS_TIMEOUT_S.
"""

from __future__ import annotations

import functools
import http.server
import logging
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import prometheus_client as prom

from l3p.serving.logs import limited_event
from l3p.serving.security import TokenTable, bearer_token

# A scrape that sends nothing for this long is dropped (one thread per open connection).
METRICS_TIMEOUT_S = 10.0

# Per-step work is 0.05-5 ms; buckets resolve that range and the tail beyond it.
_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def handle_error(self, request, client_address) -> None:
        # A failed handshake or a dropped scrape: one JSON line (socketserver prints a traceback).
        error = sys.exc_info()[1]
        limited_event(logging.INFO, "metrics_request_failed", error=repr(error)[:200])


@dataclass(frozen=True)
class ModelMetrics:
    """One model's series, bound once so the per-step path does no label lookup."""

    steps: Any
    replans: Any
    sessions_started: Any
    step_latency: dict[bool, Any]  # by whether the step re-planned
    batches: Callable[[str], Any]  # by network (actor, distance)
    batched_steps: Callable[[str], Any]


class Metrics:
    """Server-wide series (live sessions, expiries, errors) and, labelled ``model``, each model's
    own: steps, re-plans, starts, step latency, batching, and per loaded version its memory and
    live sessions."""

    def __init__(self, sessions_live: Callable[[], int]):
        self.registry = prom.CollectorRegistry()
        live = prom.Gauge(
            "l3p_sessions_live", "Episodes currently held by the server.", registry=self.registry
        )
        live.set_function(sessions_live)  # read at scrape time: always equals the store
        self.sessions_expired = prom.Counter(
            "l3p_sessions_expired", "Episodes freed by the idle TTL.", registry=self.registry
        )
        self.errors = prom.Counter(
            "l3p_errors", "Calls answered with an error, by status code.", ["code"],
            registry=self.registry,
        )
        self._steps = prom.Counter(
            "l3p_steps", "Observations answered with an action.", ["model"], registry=self.registry
        )
        self._replans = prom.Counter(
            "l3p_replans", "Steps that ran the graph search.", ["model"], registry=self.registry
        )
        self._sessions_started = prom.Counter(
            "l3p_sessions_started", "Episodes started.", ["model"], registry=self.registry
        )
        self._batches = prom.Counter(
            "l3p_batches", "onnxruntime calls answering steps, by network (actor, distance).",
            ["model", "network"], registry=self.registry,
        )
        self._batched_steps = prom.Counter(
            "l3p_batched_steps", "Steps answered by those calls (steps / batches = mean batch).",
            ["model", "network"], registry=self.registry,
        )
        self._latency = prom.Histogram(
            "l3p_step_latency_seconds",
            "Server-side time to answer one observation, by whether it re-planned.",
            ["model", "replanned"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.model_memory = prom.Gauge(
            "l3p_model_memory_bytes", "Resident memory the server grew by loading this version.",
            ["model", "version"], registry=self.registry,
        )
        self.model_loads = prom.Counter(
            "l3p_model_loads", "Versions loaded (ok) or refused (failed), by model.",
            ["model", "result"], registry=self.registry,
        )
        self.openpi_connections = prom.Gauge(
            "l3p_openpi_connections", "Open openpi websocket connections (one robot each).",
            registry=self.registry,
        )
        self.openpi_refused = prom.Counter(
            "l3p_openpi_refused", "openpi connections and frames refused, by reason (frame_cost, flood, "
            "half_open, quota, idle).", ["reason"], registry=self.registry,
        )
        self._models: dict[str, ModelMetrics] = {}

    def model(self, name: str) -> ModelMetrics:
        found = self._models.get(name)
        if found is None:
            found = self._models[name] = ModelMetrics(
                steps=self._steps.labels(name),
                replans=self._replans.labels(name),
                sessions_started=self._sessions_started.labels(name),
                step_latency={True: self._latency.labels(name, "true"),
                              False: self._latency.labels(name, "false")},
                batches=functools.partial(self._batches.labels, name),
                batched_steps=functools.partial(self._batched_steps.labels, name),
            )
        return found

    def serve_http(self, port: int, host: str, tls: ssl.SSLContext | None = None,
                   tokens: TokenTable | None = None) -> http.server.ThreadingHTTPServer:
        """Serves /metrics on daemon threads; OSError if the port cannot be bound."""
        registry = self.registry

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = METRICS_TIMEOUT_S

            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    return self._answer(404, b"not found: scrape /metrics\n")
                if tokens is not None:
                    token = bearer_token(((k.lower(), v) for k, v in self.headers.items()))
                    if token is None or tokens.name_of(token) is None:
                        return self._answer(401, b"send 'Authorization: Bearer <token>'\n",
                                            {"WWW-Authenticate": "Bearer"})
                self._answer(200, prom.generate_latest(registry),
                             {"Content-Type": prom.CONTENT_TYPE_LATEST})

            def _answer(self, code: int, body: bytes, headers: dict | None = None) -> None:
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args) -> None:
                pass  # scrapes are not events; refusals show in the scraper's own status

        server = _HTTPServer((host, port), Handler)
        if tls is not None:  # the handshake runs in the request's thread, not the accept loop
            server.socket = tls.wrap_socket(server.socket, server_side=True,
                                            do_handshake_on_connect=False)
        threading.Thread(target=server.serve_forever, name="l3p-metrics", daemon=True).start()
        return server

"""Prometheus metrics of the planner server, in a registry of their own (scraped at /metrics)."""

from __future__ import annotations

from typing import Callable

import prometheus_client as prom

# Per-step work is 0.05-5 ms; buckets resolve that range and the tail beyond it.
_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)


class Metrics:
    def __init__(self, sessions_live: Callable[[], int]):
        self.registry = prom.CollectorRegistry()
        live = prom.Gauge(
            "l3p_sessions_live", "Episodes currently held by the server.", registry=self.registry
        )
        live.set_function(sessions_live)  # read at scrape time: always equals the store
        self.steps = prom.Counter(
            "l3p_steps", "Observations answered with an action.", registry=self.registry
        )
        self.replans = prom.Counter(
            "l3p_replans", "Steps that ran the graph search.", registry=self.registry
        )
        self.sessions_started = prom.Counter(
            "l3p_sessions_started", "Episodes started.", registry=self.registry
        )
        self.sessions_expired = prom.Counter(
            "l3p_sessions_expired", "Episodes freed by the idle TTL.", registry=self.registry
        )
        self.errors = prom.Counter(
            "l3p_errors", "Calls answered with an error, by status code.", ["code"],
            registry=self.registry,
        )
        self.batches = prom.Counter(
            "l3p_batches", "onnxruntime calls answering steps, by network (actor, distance).",
            ["network"], registry=self.registry,
        )
        self.batched_steps = prom.Counter(
            "l3p_batched_steps", "Steps answered by those calls (steps / batches = mean batch).",
            ["network"], registry=self.registry,
        )
        latency = prom.Histogram(
            "l3p_step_latency_seconds",
            "Server-side time to answer one observation, by whether it re-planned.",
            ["replanned"], buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        # Bound once so the per-step path does no label lookup.
        self.step_latency = {True: latency.labels("true"), False: latency.labels("false")}

    def serve_http(self, port: int, host: str) -> None:
        """Serves /metrics on a daemon thread."""
        prom.start_http_server(port, addr=host, registry=self.registry)

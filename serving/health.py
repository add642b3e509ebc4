"""The standard grpc.health.v1 service (Check and Watch) for the asyncio server.

Unlike grpcio-health-checking's servicer, a Watch stream ends (status OK) once shutdown begins,
right after it has sent NOT_SERVING: an idle watcher is a call in flight, and would otherwise
hold a graceful shutdown for its whole grace period.
"""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVICE_NAME = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name  # grpc.health.v1.Health
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class HealthService(health_pb2_grpc.HealthServicer):
    """Statuses by service name ("" = the server as a whole). Use from the server's loop."""

    def __init__(self) -> None:
        self._status: dict[str, int] = {}
        self._changed = asyncio.Event()
        self.shutting_down = False
        self._watches: set[asyncio.Task] = set()

    def set(self, service: str, status: int) -> None:
        if not self.shutting_down:
            self._status[service] = status
            self._notify()

    async def enter_graceful_shutdown(self, timeout_s: float = 5.0) -> None:
        """Every service NOT_SERVING for good; returns once open watches have sent it and ended
        (before the server stops taking writes), or after timeout_s."""
        for service in self._status:
            self._status[service] = NOT_SERVING
        self.shutting_down = True
        self._notify()
        if self._watches:
            await asyncio.wait(set(self._watches), timeout=timeout_s)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def Check(self, request, context):
        status = self._status.get(request.service)
        if status is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(self, request, context):
        task = asyncio.current_task()
        self._watches.add(task)
        try:
            await self._watch(request, context)
        finally:
            self._watches.discard(task)

    async def _watch(self, request, context):
        last = None
        while True:
            changed = self._changed  # taken before reading, so no change is missed
            status = self._status.get(request.service, SERVICE_UNKNOWN)
            if status != last:
                await context.write(health_pb2.HealthCheckResponse(status=status))
                last = status
            if self.shutting_down:
                return
            await changed.wait()

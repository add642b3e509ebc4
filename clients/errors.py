"""The client's typed errors, one per gRPC status the planner answers with, and which failures
a call may be repeated after (retry) or an episode carried on after (resume)."""

from __future__ import annotations

import grpc

from l3p.core.errors import UNAVAILABLE, L3PError


class PlannerError(L3PError):
    """A failed planner call: ``code`` is the gRPC status, ``message`` the server's text.
    An app that lets it propagate exits with ``UNAVAILABLE``."""

    exit_code = UNAVAILABLE

    def __init__(self, code: grpc.StatusCode, message: str, method: str = "") -> None:
        self.code = code
        self.message = message
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {message}")


class InvalidArgument(PlannerError):
    """Wrong length, NaN/Inf or a bad option; fix the request."""


class NotFound(PlannerError):
    """Unknown, ended or expired session."""


class FailedPrecondition(PlannerError):
    """Out-of-order use, e.g. an observation before the goal on a stream."""


class ResourceExhausted(PlannerError):
    """The server's session (or concurrency) limit is reached."""


class Unavailable(PlannerError):
    """The server cannot be reached (down, restarting, network)."""


class DeadlineExceeded(PlannerError):
    """No answer within the call's deadline."""


class Unauthenticated(PlannerError):
    """The server wants a bearer token (``token=``) and got none or a wrong one."""


_ERRORS: dict[grpc.StatusCode, type[PlannerError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}

RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED})
"""Failures after which a call that may be repeated (not Act) is: the server cannot be reached,
or cancelled the call as it was stopping (a blocking unary call is never cancelled by this
client)."""

LOST = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.CANCELLED,
                  grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
"""Failures after which an episode's session is gone or out of reach, so a new session can carry
on (resume=True): the server cannot be reached (UNAVAILABLE), no longer holds the session after a
restart (NOT_FOUND), cancelled the call while stopping (CANCELLED), or a proxy reset the call
when the replica behind it died (INTERNAL, UNKNOWN). Resuming abandons the old session, so a
call that did reach it before failing is never applied twice. Not among them: the caller's
own errors and DEADLINE_EXCEEDED (a slow server may still answer the next call)."""


def translate(err: grpc.RpcError, method: str) -> PlannerError:
    """The typed error for a failed call (grpc's sync errors are also ``grpc.Call``)."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    code = code or grpc.StatusCode.UNKNOWN
    return _ERRORS.get(code, PlannerError)(code, details or "", method)

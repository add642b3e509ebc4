"""The server's error model: each expected failure is one exception type answered with one gRPC
status code and a message a person can act on. Anything else is a bug, answered INTERNAL with a
short message (never UNKNOWN, never a traceback)."""

from __future__ import annotations

import grpc

from l3p.serving.sessions import SessionLimitError, SessionNotFoundError


class InvalidRequestError(ValueError):
    """A field of the request is wrong: its length, a NaN, an option out of range."""


class StreamOrderError(RuntimeError):
    """Control stream messages in the wrong order (an observation before the goal, two goals)."""


class UnknownModelError(KeyError):
    """A request named a model the server does not serve."""

    def __str__(self) -> str:
        return self.args[0]


class AdminOnlyError(RuntimeError):
    """An operator's call on a server that admits no operator (no --admin-token-file)."""


class DeadlineError(RuntimeError):
    """The call's deadline passed before its answer could be of use."""


_STATUS_OF = (
    (InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (SessionNotFoundError, grpc.StatusCode.NOT_FOUND),
    (UnknownModelError, grpc.StatusCode.NOT_FOUND),
    (AdminOnlyError, grpc.StatusCode.PERMISSION_DENIED),
    (StreamOrderError, grpc.StatusCode.FAILED_PRECONDITION),
    (SessionLimitError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (DeadlineError, grpc.StatusCode.DEADLINE_EXCEEDED),
)


def status_of(exc: BaseException) -> grpc.StatusCode | None:
    """The status code of an expected failure; None for a bug."""
    return next((code for kind, code in _STATUS_OF if isinstance(exc, kind)), None)

"""What the openpi listener's peers may hold, whoever they are: handshakes under way per address,
open connections per caller, and the log lines their refusals may cost.

A connection (`Peer`, the websocket library's connection with its places) holds a place among
its address's opening handshakes from TCP accept until its HTTP request is read (more than
MAX_OPENING_PER_ADDRESS at once: dropped unanswered), and, once admitted, a place among its
caller's open connections until it closes: a caller with a token or a client certificate counts
against its own quota (--max-sessions-per-principal, as its sessions do), a caller without against
--max-sessions. Every refusal is counted in ``l3p_openpi_refused{reason}`` and logged through
PEER_LOG, so a flood of peers costs a few lines.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.frames import CloseCode

from l3p.serving.logs import RateLimit, limited_event
from l3p.serving.metrics import Metrics

OPEN_TIMEOUT_S = 10.0  # the opening handshake, TLS included
# Handshakes under way from one address; a fleet behind one NAT opens a few at a time.
MAX_OPENING_PER_ADDRESS = 32
# Refusals of peers (handshakes, quotas, idle connections): lines a flood of them may cost.
PEER_LOG = RateLimit(burst=10, per_s=1.0)


class PeerBounds:
    """The places peers hold, and their refusals."""

    def __init__(self, metrics: Metrics, per_principal: Callable[[], int | None], max_connections: int):
        self._metrics = metrics
        self._per_principal = per_principal  # the session store's quota, read when asked
        self._max_connections = max_connections
        self._opening: collections.Counter[str] = collections.Counter()  # by address
        self._open: collections.Counter[str] = collections.Counter()  # admitted, by principal

    def opening(self, address: str) -> bool:
        """Whether a handshake from this address may start now (it then holds a place)."""
        if self._opening[address] >= MAX_OPENING_PER_ADDRESS:
            self.refused("half_open", f"{MAX_OPENING_PER_ADDRESS} handshakes under way from this address: "
                                      "dropped unanswered", address=address)
            return False
        self._opening[address] += 1
        return True

    def admit(self, principal: str) -> str | None:
        """Takes a place among this caller's connections; or why not (refused and counted)."""
        quota = self._per_principal()
        if principal and quota is not None:
            full, flag = self._open[principal] >= quota, "--max-sessions-per-principal"
            what = f"{quota} openpi connections of this caller are open"
        else:
            full, flag = self._open[principal] >= self._max_connections, "--max-sessions"
            what = f"{self._max_connections} openpi connections are open"
        if full:
            reason = f"{what} ({flag}): close one or try again later"
            self.refused("quota", reason)
            self._metrics.errors.labels("RESOURCE_EXHAUSTED").inc()
            return reason
        self._open[principal] += 1
        return None

    def refused(self, reason: str, message: str, **fields) -> None:
        self._metrics.openpi_refused.labels(reason).inc()
        limited_event(logging.INFO, "openpi_peer_refused", PEER_LOG, reason=reason, message=message, **fields)

    def opened(self, address: str) -> None:
        """A handshake from this address is no longer under way."""
        _release(self._opening, address)

    def closed(self, principal: str) -> None:
        """An admitted connection of this caller closed."""
        _release(self._open, principal)


def _release(places: collections.Counter[str], key: str) -> None:
    places[key] -= 1
    if not places[key]:
        del places[key]


class Peer(ServerConnection):
    """A connection holding its places in `bounds` (made by the listener's `serve`)."""

    def __init__(self, bounds: PeerBounds, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._bounds = bounds
        self.protocol.fail = self._fail  # the library's own close of an oversized frame names our flag
        self._address: str | None = None  # while its handshake is under way
        self.principal: str | None = None  # once admitted

    def _fail(self, code: int, reason: str = "") -> None:
        if code == CloseCode.MESSAGE_TOO_BIG:
            reason = f"{reason} (--openpi-max-frame-bytes)"
        type(self.protocol).fail(self.protocol, code, reason)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if peer else ""
        if not self._bounds.opening(address):
            transport.abort()  # no answer: the handshake ends at once, unlogged by the library
            return
        self._address = address

    def request_read(self) -> None:
        """Its HTTP request is in: it leaves the handshakes under way."""
        if self._address is not None:
            self._bounds.opened(self._address)
            self._address = None

    def admit(self, principal: str) -> str | None:
        """Takes a place among `principal`'s connections, or says why not."""
        reason = self._bounds.admit(principal)
        if reason is None:
            self.principal = principal
        return reason

    def connection_lost(self, exc: Exception | None) -> None:
        self.request_read()
        if self.principal is not None:
            self._bounds.closed(self.principal)
            self.principal = None
        super().connection_lost(exc)

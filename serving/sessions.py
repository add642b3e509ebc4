"""The session store: live episodes by id, bounded in number, freed after an idle TTL.

One lock guards the dictionary and is held only for dictionary work, so the store may be used
from any thread (the server uses it from its event loop only). A step runs under the session's own
asyncio lock (`Session.lock`), so episodes never wait for each other.

A session has an owner: the principal that opened it and, for a Control stream, that stream.
Any other caller asking for it gets the same NOT_FOUND as for an unknown id, so a leaked or
guessed id neither drives an episode nor reveals that it exists.

Two limits bound the live sessions: ``max_sessions`` in all, and ``per_principal`` for each
principal, so one robot or token cannot fill the server and lock the others out.
"""

from __future__ import annotations

import asyncio
import collections
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class SessionNotFoundError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


class SessionLimitError(RuntimeError):
    pass


@dataclass(frozen=True)
class Owner:
    principal: str  # serving.security: "token:NAME", "cert:CN", both, or "" (no authentication)
    stream: str | None = None  # set for a session opened on a Control stream: unary calls never match

    @classmethod
    def of_stream(cls, principal: str) -> Owner:
        return cls(principal, secrets.token_hex(8))


@dataclass(eq=False)
class Session:
    id: str
    planner: Any  # l3p.core.EpisodePlanner; the store does not look inside
    last_used: float
    owner: Owner = Owner("")
    model: Any = None  # the model version it runs on (serving/repository.py); opaque here
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one step at a time


class SessionStore:
    def __init__(
        self,
        ttl_s: float,
        max_sessions: int,
        on_expire: Callable[[Session], None] = lambda session: None,
        clock: Callable[[], float] = time.monotonic,
        id_prefix: str = "",
        per_principal: int | None = None,
    ):
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self.per_principal = per_principal  # None: only the global limit
        self._on_expire = on_expire
        self._by_principal: collections.Counter[str] = collections.Counter()
        self._clock = clock
        self._id_prefix = id_prefix  # names the replica, for proxies that route by session id
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def count(self, principal: str) -> int:
        """Live sessions opened by this principal."""
        return self._by_principal[principal]

    def check_capacity(self, principal: str = "") -> None:
        """SessionLimitError unless this principal may add a session now (idle ones are expired
        first). Lets a caller refuse before doing the work a new session needs."""
        if self._full(principal):
            self.expire()
        if self._full(principal):
            raise self._limit_error(principal)

    def add(self, planner: Any, owner: Owner = Owner(""), model: Any = None) -> Session:
        """Stores a new session; SessionLimitError when a limit is reached."""
        self.check_capacity(owner.principal)
        session = Session(id=self._id_prefix + secrets.token_hex(16), planner=planner,
                          last_used=self._clock(), owner=owner, model=model)
        with self._lock:
            if self._full(owner.principal):  # filled up since the check
                raise self._limit_error(owner.principal)
            self._sessions[session.id] = session
            self._by_principal[owner.principal] += 1
        return session

    def get(self, session_id: str, owner: Owner = Owner("")) -> Session:
        """The live session with this id and owner, marked as used now; SessionNotFoundError
        otherwise."""
        now = self._clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.owner != owner:
                raise self._not_found(session_id)
            if session is not None and now - session.last_used <= self.ttl_s:
                session.last_used = now
                return session
        if session is not None:
            self.expire()
        raise self._not_found(session_id)

    def pop(self, session_id: str, owner: Owner = Owner("")) -> Session:
        """Removes and returns the session (an explicit end); SessionNotFoundError if there is
        none with this id and owner."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.owner != owner:
                raise self._not_found(session_id)
            self._remove(session)
        return session

    def discard(self, session_id: str) -> Session | None:
        """Removes the session if it is still there (a stream's cleanup, which may race expiry)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            self._remove(session)
        return session

    def expire(self) -> list[Session]:
        """Removes every session idle for longer than the TTL and reports each to on_expire."""
        deadline = self._clock() - self.ttl_s
        with self._lock:
            expired = [s for s in self._sessions.values() if s.last_used < deadline]
            for session in expired:
                self._remove(session)
        for session in expired:
            self._on_expire(session)
        return expired

    async def reap(self, interval_s: float) -> None:
        """Calls expire() every interval_s until cancelled: the TTL reaper, a task on the
        server's event loop."""
        while True:
            await asyncio.sleep(interval_s)
            self.expire()

    def _remove(self, session: Session) -> None:  # under self._lock
        del self._sessions[session.id]
        principal = session.owner.principal
        self._by_principal[principal] -= 1
        if not self._by_principal[principal]:
            del self._by_principal[principal]

    def _full(self, principal: str) -> bool:
        return len(self._sessions) >= self.max_sessions or (
            self.per_principal is not None and self._by_principal[principal] >= self.per_principal)

    def _limit_error(self, principal: str) -> SessionLimitError:
        if len(self._sessions) >= self.max_sessions:
            reached = f"{self.max_sessions} live sessions (--max-sessions)"
        else:
            who = repr(principal) if principal else "this caller"
            reached = (f"{self.per_principal} live sessions of {who} "
                       "(--max-sessions-per-principal)")
        return SessionLimitError(
            f"session limit reached: {reached}; end finished episodes or let idle ones "
            f"expire ({self.ttl_s:g} s TTL)"
        )

    def _not_found(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(
            f"session_id {session_id[:64]!r} is not a live session: unknown, ended, or idle for "
            f"more than {self.ttl_s:g} s (expired); start a new episode"
        )

"""The session store: live episodes by id, bounded in number, freed after an idle TTL.

One lock guards the dictionary and is held only for dictionary work, so the store may be used
from any thread (the server uses it from its event loop only). A step runs under the session's own
asyncio lock (`Session.lock`), so episodes never wait for each other.

A session has an owner: the principal that opened it and, for a Control stream, that stream.
Any other caller asking for it gets the same NOT_FOUND as for an unknown id, so a leaked or
guessed id neither drives an episode nor reveals that it exists.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable


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
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one step at a time


class SessionStore:
    def __init__(
        self,
        ttl_s: float,
        max_sessions: int,
        on_expire: Callable[[Session], None] = lambda session: None,
        clock: Callable[[], float] = time.monotonic,
        id_prefix: str = "",
    ):
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._on_expire = on_expire
        self._clock = clock
        self._id_prefix = id_prefix  # names the replica, for proxies that route by session id
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def check_capacity(self) -> None:
        """SessionLimitError unless a session can be added now (idle ones are expired first).

        Lets a caller refuse before doing the work a new session needs."""
        if len(self._sessions) >= self.max_sessions:
            self.expire()
        if len(self._sessions) >= self.max_sessions:
            raise self._limit_error()

    def add(self, planner: Any, owner: Owner = Owner("")) -> Session:
        """Stores a new session; SessionLimitError when max_sessions are live."""
        self.check_capacity()
        session = Session(id=self._id_prefix + secrets.token_hex(16), planner=planner,
                          last_used=self._clock(), owner=owner)
        with self._lock:
            if len(self._sessions) >= self.max_sessions:  # filled up since the check
                raise self._limit_error()
            self._sessions[session.id] = session
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
            del self._sessions[session_id]
        return session

    def discard(self, session_id: str) -> Session | None:
        """Removes the session if it is still there (a stream's cleanup, which may race expiry)."""
        with self._lock:
            return self._sessions.pop(session_id, None)

    def expire(self) -> list[Session]:
        """Removes every session idle for longer than the TTL and reports each to on_expire."""
        deadline = self._clock() - self.ttl_s
        with self._lock:
            expired = [s for s in self._sessions.values() if s.last_used < deadline]
            for session in expired:
                del self._sessions[session.id]
        for session in expired:
            self._on_expire(session)
        return expired

    async def reap(self, interval_s: float) -> None:
        """Calls expire() every interval_s until cancelled: the TTL reaper, a task on the
        server's event loop."""
        while True:
            await asyncio.sleep(interval_s)
            self.expire()

    def _limit_error(self) -> SessionLimitError:
        return SessionLimitError(
            f"session limit reached: {self.max_sessions} live sessions (--max-sessions); "
            f"end finished episodes or let idle ones expire ({self.ttl_s:g} s TTL)"
        )

    def _not_found(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(
            f"session_id {session_id[:64]!r} is not a live session: unknown, ended, or idle for "
            f"more than {self.ttl_s:g} s (expired); start a new episode"
        )

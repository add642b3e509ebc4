"""Blocking work (a look at the model repository, a model load) run off the event loop in a
daemon thread of its own, waited on for a bounded time."""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Callable

from l3p.core.errors import L3PError


class LoadJammedError(L3PError):
    """A look at the repository or a load took longer than the load timeout; it was abandoned."""


def _clear_frames(exc: BaseException | None) -> None:
    """Empties the frames of ``exc``'s traceback, and of the exceptions it was raised from: what the
    work held there (a refused graph's bytes, the sessions opened before it) would otherwise stay
    allocated until a garbage collection, since the waiter's futures and the exception reference each
    other. The tracebacks keep each frame's file and line."""
    while exc is not None:
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__  # `raise ... from None` still keeps the one handled


async def run_bounded(work: Callable[[], object], timeout_s: float, what: str,
                      on_late: Callable[[object], None] = lambda result: None):
    """``work()`` run in a daemon thread of its own, waited on for at most ``timeout_s``
    (LoadJammedError past it, naming ``what``). A thread stuck in a read holds up neither the
    event loop, nor later calls, nor the process's exit; a result that comes after its caller
    stopped waiting (timeout, cancellation) is handed to ``on_late`` to dispose of."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()
    lock = threading.Lock()
    state = {"abandoned": False, "handed": False}

    def settle(result, error) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result = error = None
        try:
            result = work()
        except BaseException as exc:  # noqa: BLE001 (handed to the waiter, which sorts it)
            error = exc
            _clear_frames(exc)
        with lock:
            if not state["abandoned"]:
                try:
                    loop.call_soon_threadsafe(settle, result, error)
                    state["handed"] = True
                except RuntimeError:  # the loop is closed: the server is gone
                    pass
        if not state["handed"] and result is not None:
            on_late(result)

    threading.Thread(target=run, name="l3p-load", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(future), timeout_s)
    except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
        with lock:
            state["abandoned"] = True
            handed = state["handed"]
        if handed and isinstance(exc, asyncio.TimeoutError):
            return await future  # it finished as the wait ran out: settled on the next loop turn
        if handed:  # cancelled with the result on its way: dispose of it when it lands
            future.add_done_callback(
                lambda f: on_late(f.result()) if not f.cancelled() and f.exception() is None else None)
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise LoadJammedError(f"{what} took longer than {timeout_s:g} s (--load-timeout) and was "
                              "abandoned: a file that is slow to read?") from None

"""Where the server's CPU work runs: off the event loop, batched across sessions.

Steps of different sessions that are waiting at the same time are answered by one onnxruntime
call per network (what Triton's dynamic batcher does): keep steps by one actor call, re-plan
steps by one distance call. A batch takes every request queued when it starts, so requests
that arrive while a call runs go together in the next one; `max_delay_s` > 0 also holds the
first request of a batch that long for company (Triton's max_queue_delay), trading one robot's
latency for fewer, larger calls. onnxruntime computes each row of these MLPs independently of
the others in its batch (tests/test_server_e2e.py checks batched == sequential actions), so
batching changes no result.

Episode starts are batched too (StartBatcher), in two stages: the value calls (landmark -> goal,
N rows per start, a cost per row) take every start queued when they begin, and the goal columns
(a fixed cost per batch: the soft search's iterations of small numpy steps, which hold the GIL;
~0.8 ms for the shipped bundles) wait until no start is left without its values, then solve
every valued start with the same planner settings side by side. A burst of starts thus pays the
columns' fixed cost about once, not once per value call. Each start's result is exactly what it
would be alone.

One thread runs the network calls (onnxruntime releases the GIL, and at one intra-op thread a
single thread keeps the other core for the event loop), except where the hand-off would cost
more than it gives: small actor batches run on the loop (INLINE_ROWS), and so does a step that
nothing else could be batched with (nothing queued, nothing else ready to run on the loop: a
single robot's step, keep or re-plan). Episode starts run on a second thread so a burst of
starts does not delay the steps of running episodes.
"""

from __future__ import annotations

import asyncio
import collections
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from l3p.core import LandmarkGraph, PlannerConfig
from l3p.core.search import ValueFn

# Actor batches up to this many rows run on the event loop (see MicroBatcher): measured on the
# shipped bundle, a keep step's round trip was ~170 µs shorter than through the network thread,
# and a 16-row actor call takes ~30-60 µs.
INLINE_ROWS = 16
# Episode starts in one value call, and valued starts waiting for their columns, at most.
MAX_START_BATCH = 64


class MicroBatcher:
    """`await batcher(*inputs)` -> fn's output for those rows, computed in one batched call
    with the other requests waiting at the same time: fn(*inputs concatenated row-wise).

    fn returns an array or a tuple of arrays, each with one row per input row. An exception in
    fn is the answer of every request of that batch. A batch of at most `inline_rows` rows runs
    on the event loop itself: for a call of a few tens of microseconds the hand-off to the
    executor thread and back costs more than the call. With `direct`, a request that no other
    could join (max_delay_s 0, no batch queued or running, no other callback ready on the loop)
    is answered at once on the loop, without the queue's two loop iterations and the hand-off.
    Use from one event loop.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        executor: ThreadPoolExecutor,
        max_delay_s: float = 0.0,
        max_rows: int = 4096,
        inline_rows: int = 0,
        direct: bool = False,
        on_batch: Callable[[int], None] = lambda requests: None,
    ):
        self._fn = fn
        self._executor = executor
        self._max_delay_s = max_delay_s
        self._max_rows = max_rows
        self._inline_rows = inline_rows
        self._direct = direct and max_delay_s == 0  # a delay asks to wait for company
        self._on_batch = on_batch
        self._queue: collections.deque[_Request] = collections.deque()
        self._rows = 0
        self._running = False

    async def __call__(self, *inputs: np.ndarray):
        loop = asyncio.get_running_loop()
        if self._direct and not self._running and _nothing_else_ready(loop):
            output = self._fn(*inputs)
            self._on_batch(1)
            return output
        request = _Request(inputs, loop.create_future())
        self._queue.append(request)
        self._rows += request.rows
        if not self._running:
            self._running = True
            loop.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            # Started by call_soon: the requests that arrived in this loop iteration are queued.
            while self._queue:
                if self._max_delay_s > 0 and self._rows < self._max_rows:
                    await asyncio.sleep(self._max_delay_s)
                batch, rows = self._take()
                if len(batch) == 1:
                    inputs = batch[0].inputs
                else:  # copies: the sessions' arrays are theirs again once answered
                    inputs = tuple(np.concatenate(parts) for parts in zip(*(r.inputs for r in batch)))
                try:
                    if rows <= self._inline_rows:
                        output = self._fn(*inputs)
                    else:
                        output = await loop.run_in_executor(self._executor, self._fn, *inputs)
                except Exception as exc:
                    _fail([request.future for request in batch], exc)
                    continue
                self._on_batch(len(batch))
                start = 0
                for request in batch:
                    stop = start + request.rows
                    if not request.future.done():  # a cancelled call no longer waits
                        request.future.set_result(_rows_of(output, start, stop))
                    start = stop
        finally:
            self._running = False

    def _take(self) -> tuple[list[_Request], int]:
        """The oldest requests, in order, up to max_rows rows (at least one)."""
        batch = [self._queue.popleft()]
        rows = batch[0].rows
        while self._queue and rows + self._queue[0].rows <= self._max_rows:
            request = self._queue.popleft()
            batch.append(request)
            rows += request.rows
        self._rows -= rows
        return batch, rows


class _Request:
    __slots__ = ("inputs", "future", "rows")

    def __init__(self, inputs: tuple[np.ndarray, ...], future: asyncio.Future):
        self.inputs, self.future, self.rows = inputs, future, len(inputs[0])


def _nothing_else_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether no callback but the running one is ready on the loop. asyncio has no public way
    to ask; CPython's loops keep their ready callbacks in `_ready`. A loop without it (uvloop)
    answers False: every request then goes through the queue, as without `direct`."""
    ready = getattr(loop, "_ready", None)
    return ready is not None and len(ready) == 0


class StartBatcher:
    """`await starts(goal, config)` -> d_cg [N+1] of `LandmarkGraph.distances_to_goal`, the value
    call batched with the other starts waiting for theirs, the goal columns with every start
    valued by the time they run (see the module's docstring). Both stages run on `executor`.
    An exception is the answer of every start of the call that raised. Use from one event loop.
    """

    def __init__(self, graph: LandmarkGraph, value_fn: ValueFn, executor: ThreadPoolExecutor,
                 max_goals: int = MAX_START_BATCH):
        self._graph = graph
        self._value_fn = value_fn
        self._executor = executor
        self._max_goals = max_goals
        self._queue: collections.deque[tuple[np.ndarray, PlannerConfig, asyncio.Future]] = (
            collections.deque())
        self._running = False

    async def __call__(self, goal: np.ndarray, config: PlannerConfig) -> np.ndarray:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((goal, config, future))
        if not self._running:
            self._running = True
            loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        valued: list[tuple[PlannerConfig, asyncio.Future, np.ndarray]] = []
        try:
            while self._queue or valued:
                if self._queue and len(valued) < self._max_goals:
                    take = min(len(self._queue), self._max_goals - len(valued))
                    batch = [self._queue.popleft() for _ in range(take)]
                    goals = np.stack([goal for goal, _, _ in batch])
                    try:
                        steps = await loop.run_in_executor(
                            self._executor, self._graph.steps_to_goals, goals, self._value_fn)
                    except Exception as exc:
                        _fail([future for _, _, future in batch], exc)
                        continue
                    valued += [(config, future, row)
                               for (_, config, future), row in zip(batch, steps)]
                    if self._queue and len(valued) < self._max_goals:
                        continue  # starts came in meanwhile: their values first
                by_config: dict[PlannerConfig, list[tuple[asyncio.Future, np.ndarray]]] = {}
                for config, future, row in valued:
                    by_config.setdefault(config, []).append((future, row))
                valued = []
                for config, group in by_config.items():
                    futures = [future for future, _ in group]
                    try:
                        d_cg = await loop.run_in_executor(
                            self._executor, self._graph.distances_from_steps,
                            np.stack([row for _, row in group]), config)
                    except Exception as exc:
                        _fail(futures, exc)
                        continue
                    for future, row in zip(futures, d_cg):
                        if not future.done():  # a cancelled call no longer waits
                            future.set_result(row)
        finally:
            self._running = False


def _fail(futures: list[asyncio.Future], exc: Exception) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(exc)


def _rows_of(output, start: int, stop: int):
    if isinstance(output, tuple):
        return tuple(part[start:stop] for part in output)
    return output[start:stop]

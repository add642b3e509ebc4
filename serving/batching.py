"""Where the server's CPU work runs: off the event loop, batched across sessions.

Steps of different sessions that are waiting at the same time are answered by one onnxruntime
call per network (what Triton's dynamic batcher does): keep steps by one actor call, re-plan
steps by one distance call. A batch takes every request queued when it starts, so requests
that arrive while a call runs go together in the next one; `max_delay_s` > 0 also holds the
first request of a batch that long for company (Triton's max_queue_delay), trading one robot's
latency for fewer, larger calls. onnxruntime computes each row of these MLPs independently of
the others in its batch (tests/test_server_e2e.py checks batched == sequential actions), so
batching changes no result.

Episode starts are batched the same way: starts with the same planner settings that wait
together share one value call and solve their goal columns side by side, each exactly as alone.

One thread runs the network calls (onnxruntime releases the GIL, and at one intra-op thread a
single thread keeps the other core for the event loop), except small actor batches, which cost
less than the hand-off and run on the loop (INLINE_ROWS); episode starts run on a second thread
so a burst of starts does not delay the steps of running episodes.
"""

from __future__ import annotations

import asyncio
import collections
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Hashable

import numpy as np

from serving.bundle import Bundle
from serving.metrics import Metrics
from serving.planner import POLICY, EpisodePlanner, Inference, PlannerConfig

# Actor batches up to this many rows run on the event loop (see MicroBatcher): measured on the
# shipped bundle, a keep step's round trip was ~170 µs shorter than through the network thread,
# and a 16-row actor call takes ~30-60 µs.
INLINE_ROWS = 16
# Episode starts solved in one batch at most (each is N value rows and one goal column).
MAX_START_BATCH = 64


class MicroBatcher:
    """`await batcher(*inputs, key=k)` -> fn's output for those rows, computed in one batched
    call with the other requests of the same key waiting at the same time: fn(*inputs
    concatenated row-wise) when key is None, else fn(*inputs concatenated, key).

    fn returns an array or a tuple of arrays, each with one row per input row. An exception in
    fn is the answer of every request of that batch. A batch of at most `inline_rows` rows runs
    on the event loop itself: for a call of a few tens of microseconds the hand-off to the
    executor thread and back costs more than the call. Use from one event loop.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        executor: ThreadPoolExecutor,
        max_delay_s: float = 0.0,
        max_rows: int = 4096,
        inline_rows: int = 0,
        on_batch: Callable[[int], None] = lambda requests: None,
    ):
        self._fn = fn
        self._executor = executor
        self._max_delay_s = max_delay_s
        self._max_rows = max_rows
        self._inline_rows = inline_rows
        self._on_batch = on_batch
        self._queue: collections.deque[_Request] = collections.deque()
        self._rows = 0
        self._running = False

    async def __call__(self, *inputs: np.ndarray, key: Hashable = None):
        loop = asyncio.get_running_loop()
        request = _Request(inputs, key, loop.create_future())
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
                args = inputs if batch[0].key is None else (*inputs, batch[0].key)
                try:
                    if rows <= self._inline_rows:
                        output = self._fn(*args)
                    else:
                        output = await loop.run_in_executor(self._executor, self._fn, *args)
                except Exception as exc:
                    for request in batch:
                        if not request.future.done():  # a cancelled call no longer waits
                            request.future.set_exception(exc)
                    continue
                self._on_batch(len(batch))
                start = 0
                for request in batch:
                    stop = start + request.rows
                    if not request.future.done():
                        request.future.set_result(_rows_of(output, start, stop))
                    start = stop
        finally:
            self._running = False

    def _take(self) -> tuple[list[_Request], int]:
        """The oldest request and every queued one with its key, up to max_rows rows."""
        key = self._queue[0].key
        batch, rest, rows = [], collections.deque(), 0
        while self._queue:
            request = self._queue.popleft()
            if request.key == key and (not batch or rows + request.rows <= self._max_rows):
                batch.append(request)
                rows += request.rows
            else:
                rest.append(request)
        self._queue = rest
        self._rows -= rows
        return batch, rows


class _Request:
    __slots__ = ("inputs", "key", "future", "rows")

    def __init__(self, inputs: tuple[np.ndarray, ...], key: Hashable, future: asyncio.Future):
        self.inputs, self.key, self.future, self.rows = inputs, key, future, len(inputs[0])


def _rows_of(output, start: int, stop: int):
    if isinstance(output, tuple):
        return tuple(part[start:stop] for part in output)
    return output[start:stop]


class Engine:
    """The bundle's networks and graph solves, run off the event loop."""

    def __init__(
        self,
        bundle: Bundle,
        max_delay_s: float = 0.0,
        inline_rows: int = INLINE_ROWS,
        metrics: Metrics | None = None,
    ):
        self.bundle = bundle
        self._network_thread = ThreadPoolExecutor(1, thread_name_prefix="l3p-infer")
        self._start_thread = ThreadPoolExecutor(1, thread_name_prefix="l3p-start")

        def batcher(fn, network: str, inline: int) -> MicroBatcher:
            on_batch = lambda requests: None  # noqa: E731
            if metrics is not None:
                batches = metrics.batches.labels(network)
                steps = metrics.batched_steps.labels(network)

                def on_batch(requests: int) -> None:
                    batches.inc()
                    steps.inc(requests)

            return MicroBatcher(fn, self._network_thread, max_delay_s, inline_rows=inline,
                                on_batch=on_batch)

        # Keep steps' small actor batches inline; re-plans (N+1 rows each) always off the loop.
        self.actor = batcher(bundle.policy_fn, "actor", inline_rows)
        self.distance = batcher(bundle.distance_fn, "distance", 0)
        # Starts with the same settings that wait together are solved together: one value
        # call and the goal columns side by side (LandmarkGraph.distances_to_goals), each
        # exactly what it would be alone.
        self.starts = MicroBatcher(self._solve_goals, self._start_thread, max_rows=MAX_START_BATCH)

    def _solve_goals(self, goals: np.ndarray, config: PlannerConfig) -> np.ndarray:
        return self.bundle.landmark_graph.distances_to_goals(goals, self.bundle.value_fn, config)

    async def start_episode(
        self, goal: np.ndarray, config: PlannerConfig, seed: int | None
    ) -> EpisodePlanner:
        """The episode's planner, its graph solved from the bundle's cached landmark block."""
        d_cg = await self.starts(goal[None], key=config)
        bundle = self.bundle
        return EpisodePlanner(bundle.landmark_graph, goal, bundle.value_fn, config, seed,
                              d_cg=d_cg[0])

    async def infer(self, need: Inference):
        """The output of the network call a step prepared (`EpisodePlanner.prepare`)."""
        batcher = self.actor if need.fn == POLICY else self.distance
        return await batcher(need.obs, need.goals)

    def close(self) -> None:
        self._network_thread.shutdown(wait=False, cancel_futures=True)
        self._start_thread.shutdown(wait=False, cancel_futures=True)

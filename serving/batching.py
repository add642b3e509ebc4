"""Where the server's CPU work runs: off the event loop, batched across sessions.

Steps of different sessions that are waiting at the same time are answered by one onnxruntime
call per network (what Triton's dynamic batcher does): keep steps by one actor call, re-plan
steps by one distance call. A batch takes every request queued when it starts, so requests
that arrive while a call runs go together in the next one; `max_delay_s` > 0 also holds the
first request of a batch that long for company (Triton's max_queue_delay), trading one robot's
latency for fewer, larger calls. onnxruntime computes each row of these MLPs independently of
the others in its batch (tests/test_server_e2e.py checks batched == sequential actions), so
batching changes no result.

One thread runs the network calls (onnxruntime releases the GIL, and at one intra-op thread a
single thread keeps the other core for the event loop); episode starts run on a second thread so
a burst of starts does not delay the steps of running episodes.
"""

from __future__ import annotations

import asyncio
import collections
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from serving.bundle import Bundle
from serving.metrics import Metrics
from serving.planner import POLICY, EpisodePlanner, Inference, PlannerConfig


class MicroBatcher:
    """`await batcher(obs, goals)` -> fn's output for those rows, computed in one batched call
    of fn(all obs, all goals) with the other requests waiting at the same time.

    fn returns an array or a tuple of arrays, each with one row per input row. An exception in
    fn is the answer of every request of that batch. Use from one event loop.
    """

    def __init__(
        self,
        fn: Callable[[np.ndarray, np.ndarray], Any],
        executor: ThreadPoolExecutor,
        max_delay_s: float = 0.0,
        max_rows: int = 4096,
        on_batch: Callable[[int], None] = lambda requests: None,
    ):
        self._fn = fn
        self._on_batch = on_batch
        self._executor = executor
        self._max_delay_s = max_delay_s
        self._max_rows = max_rows
        self._queue: collections.deque[tuple[np.ndarray, np.ndarray, asyncio.Future]] = (
            collections.deque()
        )
        self._rows = 0
        self._running = False

    async def __call__(self, obs: np.ndarray, goals: np.ndarray):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((obs, goals, future))
        self._rows += len(obs)
        if not self._running:
            self._running = True
            loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.sleep(0)  # requests that arrived in this loop iteration join the batch
            while self._queue:
                if self._max_delay_s > 0 and self._rows < self._max_rows:
                    await asyncio.sleep(self._max_delay_s)
                batch, rows = [], 0
                while self._queue and (not batch or rows + len(self._queue[0][0]) <= self._max_rows):
                    batch.append(self._queue.popleft())
                    rows += len(batch[-1][0])
                self._rows -= rows
                if len(batch) == 1:
                    obs, goals = batch[0][0], batch[0][1]
                else:  # copies: the sessions' arrays are theirs again once answered
                    obs = np.concatenate([item[0] for item in batch])
                    goals = np.concatenate([item[1] for item in batch])
                try:
                    output = await loop.run_in_executor(self._executor, self._fn, obs, goals)
                except Exception as exc:
                    for _, _, future in batch:
                        if not future.done():  # a cancelled call no longer waits for it
                            future.set_exception(exc)
                    continue
                self._on_batch(len(batch))
                start = 0
                for item_obs, _, future in batch:
                    stop = start + len(item_obs)
                    if not future.done():
                        future.set_result(_rows_of(output, start, stop))
                    start = stop
        finally:
            self._running = False


def _rows_of(output, start: int, stop: int):
    if isinstance(output, tuple):
        return tuple(part[start:stop] for part in output)
    return output[start:stop]


class Engine:
    """The bundle's networks and graph solves, run off the event loop."""

    def __init__(self, bundle: Bundle, max_delay_s: float = 0.0, metrics: Metrics | None = None):
        self.bundle = bundle
        self._network_thread = ThreadPoolExecutor(1, thread_name_prefix="l3p-infer")
        self._start_thread = ThreadPoolExecutor(1, thread_name_prefix="l3p-start")

        def batcher(fn, network: str) -> MicroBatcher:
            on_batch = lambda requests: None  # noqa: E731
            if metrics is not None:
                batches = metrics.batches.labels(network)
                steps = metrics.batched_steps.labels(network)

                def on_batch(requests: int) -> None:
                    batches.inc()
                    steps.inc(requests)

            return MicroBatcher(fn, self._network_thread, max_delay_s, on_batch=on_batch)

        self.actor = batcher(bundle.policy_fn, "actor")
        self.distance = batcher(bundle.distance_fn, "distance")

    async def start_episode(
        self, goal: np.ndarray, config: PlannerConfig, seed: int | None
    ) -> EpisodePlanner:
        """The episode's planner, its graph solved from the bundle's cached landmark block."""
        bundle = self.bundle
        return await asyncio.get_running_loop().run_in_executor(
            self._start_thread, EpisodePlanner, bundle.landmark_graph, goal, bundle.value_fn,
            config, seed,
        )

    async def infer(self, need: Inference):
        """The output of the network call a step prepared (`EpisodePlanner.prepare`)."""
        batcher = self.actor if need.fn == POLICY else self.distance
        return await batcher(need.obs, need.goals)

    def close(self) -> None:
        self._network_thread.shutdown(wait=False, cancel_futures=True)
        self._start_thread.shutdown(wait=False, cancel_futures=True)

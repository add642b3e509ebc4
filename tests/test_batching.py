"""Unit tests of serving/batching.py: where a request's call runs and which requests share a call
(MicroBatcher), and how episode starts are staged (StartBatcher). End to end (batched ==
sequential actions) in test_server_contract.py."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from l3p.serving.batching import MicroBatcher, StartBatcher
from l3p.core import LandmarkGraph, PlannerConfig


class Recorder:
    """fn for a MicroBatcher: doubles its rows and records each call's rows and thread."""

    def __init__(self):
        self.calls: list[tuple[int, int]] = []  # (rows, thread id)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.calls.append((len(x), threading.get_ident()))
        if not np.isfinite(x).all():
            raise ValueError("not finite")
        return 2 * x


@pytest.fixture
def executor():
    with ThreadPoolExecutor(1) as pool:
        yield pool


def rows(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)[:, None]


def test_a_lone_request_is_answered_at_once_on_the_loop(executor):
    fn, batches = Recorder(), []
    batcher = MicroBatcher(fn, executor, direct=True, on_batch=batches.append)

    async def main():
        return threading.get_ident(), await batcher(rows(1.0, 2.0, 3.0))

    loop_thread, output = asyncio.run(main())
    np.testing.assert_array_equal(output, rows(2.0, 4.0, 6.0))
    assert fn.calls == [(3, loop_thread)] and batches == [1]


def test_requests_ready_together_share_one_call(executor):
    """Eight steps ready on the loop at once: one call answers all, each its own rows."""
    fn, batches = Recorder(), []
    batcher = MicroBatcher(fn, executor, direct=True, on_batch=batches.append)

    async def main():
        return await asyncio.gather(*(batcher(rows(i, 10 * i)) for i in range(8)))

    outputs = asyncio.run(main())
    for i, output in enumerate(outputs):
        np.testing.assert_array_equal(output, rows(2 * i, 20 * i))
    assert [r for r, _ in fn.calls] == [16] and batches == [8]


def test_batches_past_the_inline_size_run_on_the_executor(executor):
    fn = Recorder()
    batcher = MicroBatcher(fn, executor, direct=True, inline_rows=4)

    async def main():
        loop_thread = threading.get_ident()
        small = asyncio.gather(*(batcher(rows(i)) for i in range(2)))  # 2 rows: on the loop
        await small
        await asyncio.gather(*(batcher(rows(i)) for i in range(6)))  # 6 rows: the executor
        return loop_thread

    loop_thread = asyncio.run(main())
    assert [r for r, _ in fn.calls] == [2, 6]
    assert fn.calls[0][1] == loop_thread and fn.calls[1][1] != loop_thread


def test_a_queue_delay_sends_even_a_lone_request_through_the_queue(executor):
    """max_delay_s asks to wait for company: no request is answered directly."""
    fn = Recorder()
    batcher = MicroBatcher(fn, executor, max_delay_s=0.001, direct=True)

    async def main():
        return threading.get_ident(), await batcher(rows(1.0))

    loop_thread, output = asyncio.run(main())
    np.testing.assert_array_equal(output, rows(2.0))
    assert len(fn.calls) == 1 and fn.calls[0][1] != loop_thread


@pytest.mark.parametrize("together", [1, 3])
def test_a_failing_call_is_the_answer_of_its_requests_only(executor, together):
    """Alone (direct) or batched, fn's exception reaches every request of that call; the
    batcher answers the next requests normally."""
    fn = Recorder()
    batcher = MicroBatcher(fn, executor, direct=True)

    async def main():
        bad = [batcher(rows(np.nan if i == 0 else i)) for i in range(together)]
        failed = await asyncio.gather(*bad, return_exceptions=True)
        return failed, await batcher(rows(5.0))

    failed, after = asyncio.run(main())
    assert all(isinstance(e, ValueError) and str(e) == "not finite" for e in failed)
    np.testing.assert_array_equal(after, rows(10.0))


# ------------------------------------------------------------------------------ episode starts


class CountingGraph(LandmarkGraph):
    """A LandmarkGraph that records the goals of each goal-column solve."""

    def __init__(self, *args):
        super().__init__(*args)
        self.column_solves: list[int] = []

    def distances_from_steps(self, steps, config):
        self.column_solves.append(len(steps))
        return super().distances_from_steps(steps, config)


class PlaneValue:
    """value_fn: Euclidean distance / 2 in a plane, recording the goals of each call (after the
    graph's own landmark-pair call). `gate`, when set, holds the next call until released."""

    def __init__(self, n_landmarks: int):
        self.n = n_landmarks
        self.calls: list[int] = []
        self.gate: tuple[threading.Event, threading.Event] | None = None

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.gate is not None:
            entered, release = self.gate
            self.gate = None
            entered.set()
            release.wait(10)
        if len(a) != self.n * self.n:  # not the graph's landmark-pair call
            self.calls.append(len(a) // self.n)
        if not np.isfinite(b).all():
            raise ValueError("goal not finite")
        return np.linalg.norm(a - b, axis=1) / 2


@pytest.fixture
def plane():
    landmarks = np.random.default_rng(0).uniform(0.0, 30.0, (24, 2)).astype(np.float32)
    value = PlaneValue(len(landmarks))
    return CountingGraph(landmarks, value), value


def goals(k: int) -> list[np.ndarray]:
    return list(np.random.default_rng(1).uniform(-5.0, 35.0, (k, 2)).astype(np.float32))


def test_starts_waiting_together_share_one_value_call_and_one_solve_per_setting(plane, executor):
    graph, value = plane
    soft, hard = PlannerConfig(), PlannerConfig(search="hard")
    starts = StartBatcher(graph, value, executor)
    configs = [soft, hard, soft, soft, hard, soft, soft, hard]

    async def main():
        return await asyncio.gather(*(starts(g, c) for g, c in zip(goals(8), configs)))

    together = asyncio.run(main())
    assert value.calls == [8] and sorted(graph.column_solves) == [3, 5]
    for goal, config, d_cg in zip(goals(8), configs, together):  # bit for bit as alone
        np.testing.assert_array_equal(d_cg, graph.distances_to_goal(goal, value, config))


def test_starts_arriving_during_a_value_call_get_theirs_before_any_columns(plane, executor):
    """One start's value call runs; three more arrive meanwhile. Their value call comes next,
    then one goal-column solve for all four: the columns' fixed cost is paid once."""
    graph, value = plane
    starts = StartBatcher(graph, value, executor)
    entered, release = threading.Event(), threading.Event()
    value.gate = (entered, release)
    config = PlannerConfig()

    async def main():
        g = goals(4)
        first = asyncio.ensure_future(starts(g[0], config))
        while not entered.is_set():  # the first value call is running
            await asyncio.sleep(0.001)
        rest = [asyncio.ensure_future(starts(goal, config)) for goal in g[1:]]
        await asyncio.sleep(0.01)
        release.set()
        return await asyncio.gather(first, *rest)

    results = asyncio.run(main())
    assert value.calls == [1, 3] and graph.column_solves == [4]
    for goal, d_cg in zip(goals(4), results):
        np.testing.assert_array_equal(d_cg, graph.distances_to_goal(goal, value, config))


def test_a_failing_value_call_fails_its_starts_only(plane, executor):
    graph, value = plane
    starts = StartBatcher(graph, value, executor)
    config = PlannerConfig()

    async def main():
        bad = [np.array([np.nan, 1.0], np.float32), goals(1)[0]]
        failed = await asyncio.gather(*(starts(g, config) for g in bad), return_exceptions=True)
        return failed, await starts(goals(2)[1], config)

    failed, after = asyncio.run(main())
    assert all(isinstance(e, ValueError) and str(e) == "goal not finite" for e in failed)
    np.testing.assert_array_equal(after, graph.distances_to_goal(goals(2)[1], value, config))

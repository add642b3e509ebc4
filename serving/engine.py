"""The engine: a loaded bundle's networks and graph solves, batched across sessions and run
off the event loop. It builds the bundle's landmark graph once, when the bundle is loaded; each
loaded model version has its own engine (graph cache, batchers, threads)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from l3p.core import POLICY, EpisodePlanner, Inference, LandmarkGraph, PlannerConfig
from l3p.serving.batching import INLINE_ROWS, MicroBatcher, StartBatcher
from l3p.serving.bundle import Bundle
from l3p.serving.metrics import ModelMetrics


def solved_graph(bundle: Bundle) -> LandmarkGraph:
    """Per-bundle work, done once: V over landmark pairs and its solution for the served defaults
    (an episode start then costs N value calls, see `LandmarkGraph`)."""
    graph = LandmarkGraph(bundle.landmarks, bundle.value_fn, edges=bundle.edges)
    graph.prepare(bundle.planner_defaults)
    return graph


class Engine:
    """The bundle's networks and graph solves, run off the event loop."""

    def __init__(
        self,
        bundle: Bundle,
        max_delay_s: float = 0.0,
        inline_rows: int = INLINE_ROWS,
        metrics: ModelMetrics | None = None,
    ):
        self.bundle = bundle
        self.graph = solved_graph(bundle)
        self._network_thread = ThreadPoolExecutor(1, thread_name_prefix="l3p-infer")
        self._start_thread = ThreadPoolExecutor(1, thread_name_prefix="l3p-start")

        def batcher(fn, network: str, inline: int) -> MicroBatcher:
            on_batch = lambda requests: None  # noqa: E731
            if metrics is not None:
                batches = metrics.batches(network)
                steps = metrics.batched_steps(network)

                def on_batch(requests: int) -> None:
                    batches.inc()
                    steps.inc(requests)

            return MicroBatcher(fn, self._network_thread, max_delay_s, inline_rows=inline,
                                direct=True, on_batch=on_batch)

        # Keep steps' small actor batches on the loop; batches of re-plans (N+1 rows each) off it.
        self.actor = batcher(bundle.policy_fn, "actor", inline_rows)
        self.distance = batcher(bundle.distance_fn, "distance", 0)
        self.starts = StartBatcher(self.graph, bundle.value_fn, self._start_thread)

    async def start_episode(
        self, goal: np.ndarray, config: PlannerConfig, seed: int | None
    ) -> EpisodePlanner:
        """The episode's planner, its graph solved from the bundle's cached landmark block."""
        d_cg = await self.starts(goal, config)
        bundle = self.bundle
        return EpisodePlanner(self.graph, goal, bundle.value_fn, config, seed, d_cg=d_cg)

    async def infer(self, need: Inference):
        """The output of the network call a step prepared (`EpisodePlanner.prepare`)."""
        batcher = self.actor if need.fn == POLICY else self.distance
        return await batcher(need.obs, need.goals)

    def close(self) -> None:
        self._network_thread.shutdown(wait=False, cancel_futures=True)
        self._start_thread.shutdown(wait=False, cancel_futures=True)

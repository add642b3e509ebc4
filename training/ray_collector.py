"""Rollout workers as Ray actors, for training on more than one machine (``collector="ray"``).

The learner (this process: on a GPU node, say) puts the acting weights into Ray's object store once
per cycle; each actor (a `RolloutWorker`, one CPU each, anywhere in the cluster) collects its share
of the cycle's envs on them and returns its episodes, which go to the learner's one replay. An
actor that dies (its node lost, its process killed) is replaced by a new one, which collects the
same request on the same weights again: nothing stored is lost, and a synchronous run is the run
it would have been. Ray itself is an optional extra (``pip install -e '.[ray]'``), imported
only here.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from l3p.core.errors import L3PError
from l3p.core.names import install_hint
from l3p.training.collector import (CollectorError, CollectRequest, Episodes, RolloutWorker, WorkerPool, acting_state,
                                    worker_envs)
from l3p.training.config import TrainConfig

log = logging.getLogger(__name__)

MAX_REPLACEMENTS_PER_REQUEST = 3
"""A request whose actors keep dying is a fault to report, not to retry forever."""


class RayMissingError(L3PError):
    """``collector="ray"`` without Ray installed."""


def require_ray():
    """The ``ray`` module, or RayMissingError saying which extra to install."""
    try:
        import ray
    except ImportError:
        raise RayMissingError("collector 'ray' needs the 'ray' extra (missing module 'ray'): "
                              f"{install_hint('ray')}") from None
    return ray


class RayCollector(WorkerPool):
    """``cfg.collectors`` Ray actors; joins ``cfg.ray_address``, or the Ray this process already
    started (``ray.init``), or starts a local one."""

    def __init__(self, cfg: TrainConfig, agent):
        ray = require_ray()
        super().__init__(cfg, agent)
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=cfg.ray_address, include_dashboard=False, log_to_driver=False)
        self._envs = worker_envs(cfg)
        self._remote = ray.remote(num_cpus=1, max_restarts=0)(RolloutWorker)
        self.actors = [self._remote.remote(cfg, n) for n in self._envs]
        self._weights = None                    # this cycle's weights in the object store
        self._inflight: dict[int, tuple] = {}   # worker -> (reply ref, request, weights ref)
        self._replaced: dict[int, int] = {}     # worker -> replacements during its current request

    def _publish(self, workers: list[int]) -> None:
        self._weights = self._ray.put({k: v.detach().cpu().numpy() for k, v in acting_state(self.agent).items()})

    def _send(self, worker: int, request: CollectRequest) -> None:
        self._inflight[worker] = (self.actors[worker].collect.remote(self._weights, request), request, self._weights)
        self._replaced[worker] = 0

    def _ready(self, workers: list[int], block: bool) -> list[int]:
        if not workers:
            return []
        refs = {self._inflight[i][0]: i for i in workers}
        ready, _ = self._ray.wait(list(refs), num_returns=1 if block else len(refs), timeout=None if block else 0)
        return [refs[r] for r in ready]

    def _recv(self, worker: int) -> Episodes:
        ray = self._ray
        while True:
            ref, request, weights = self._inflight[worker]
            try:
                episodes = ray.get(ref)
                break
            except ray.exceptions.RayActorError as exc:  # the actor or its node died: replace it
                if self._replaced[worker] >= MAX_REPLACEMENTS_PER_REQUEST:
                    raise CollectorError(f"worker {worker}: {MAX_REPLACEMENTS_PER_REQUEST} Ray actors died on one "
                                         f"request; last: {str(exc).splitlines()[0]}") from None
                log.warning("Ray worker %d died (%s); replacing it and collecting its request again",
                            worker, type(exc).__name__)
                self.actors[worker] = self._remote.remote(self.cfg, self._envs[worker])
                self._inflight[worker] = (self.actors[worker].collect.remote(weights, request), request, weights)
                self._replaced[worker] += 1
            except ray.exceptions.RayTaskError as exc:  # collect itself raised: a bug, not a lost worker
                raise CollectorError(f"worker {worker}: the Ray collector failed:\n{exc}") from None
        del self._inflight[worker]
        # Own copies: arrays from the object store are read-only views that pin it.
        return dataclasses.replace(episodes, workers_replaced=self._replaced.pop(worker),
                                   **{k: np.array(v) for k, v in vars(episodes).items() if isinstance(v, np.ndarray)})

    def close(self, wait: bool = True) -> None:
        """Stop the actors (their current requests are dropped: nothing of them was stored)."""
        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)
        self.actors, self._inflight = [], {}

"""Rollout workers as Ray actors on a real two-node Ray cluster (one machine): the learner's node
offers no CPU to actors (as a GPU node would keep its cores for the learner), the other runs the
workers. A killed worker actor is replaced and no stored episode is lost."""
from __future__ import annotations

import numpy as np
import pytest

from l3p.training.trainer import Trainer
from test_training_run import params, tiny_cfg

ray = pytest.importorskip("ray", reason="Ray is the optional extra: pip install '.[ray]'")
from ray.cluster_utils import Cluster

SMALL_NODE = {"object_store_memory": 80 * 2**20, "include_dashboard": False}


@pytest.fixture(scope="module")
def cluster():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, **SMALL_NODE})
    cluster.add_node(num_cpus=2, **SMALL_NODE)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def kill_a_worker_at(trainer: Trainer, cycle: int):
    def on_cycle(progress):
        if progress.cycle == cycle:
            ray.kill(trainer._collector.actors[0], no_restart=True)
    return on_cycle


def stored_episodes_intact(trainer: Trainer) -> bool:
    """Every cycle stored all its envs' episodes (a killed worker's share was collected again, not
    dropped), the replay counts them all, and none is an empty (never written) slot."""
    r, p, cfg = trainer.replay, trainer.progress, trainer.cfg
    return (r.size == r.episodes_seen == p.cycle * cfg.n_envs == p.env_steps // trainer.spec.max_steps
            and p.env_steps == cfg.total_env_steps
            and bool(np.all(np.abs(r.obs[:r.size]).sum(axis=(1, 2)) > 0)))


def test_a_killed_ray_worker_is_replaced_and_the_run_is_the_local_workers_run(cluster, tmp_path):
    """Ray actors and local worker processes run the same workers on the same seeds: with a worker
    killed mid-run, the Ray run still equals the local one, episode for episode and weight for
    weight. So it learns as they do: the process run equals the inline one (test_collector), and
    the inline run learns FetchReach (test_training_run)."""
    local = Trainer(tiny_cfg(5, collector="process", collectors=2), tmp_path / "local")
    local.train(show_progress=False)
    on_ray = Trainer(tiny_cfg(5, collector="ray", collectors=2, ray_address=cluster.address), tmp_path / "ray")
    on_ray.train(show_progress=False, on_cycle=kill_a_worker_at(on_ray, 2))
    assert on_ray.progress.workers_replaced == 1
    assert stored_episodes_intact(on_ray)
    for name in ("obs", "ag", "goal", "action"):
        np.testing.assert_array_equal(getattr(local.replay, name), getattr(on_ray.replay, name), err_msg=name)
    a, b = params(local), params(on_ray)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


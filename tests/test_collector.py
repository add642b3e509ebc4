"""The collector: a second process fills the replay exactly as the single-process path; planned
steps of many envs batch into one network call per kind."""
from __future__ import annotations

import numpy as np
import pytest

from l3p.core import EpisodePlanner, LandmarkGraph
from l3p.training.collector import CollectorError, CollectRequest, ProcessCollector, planned_actions
from l3p.training.trainer import Trainer
from test_training_run import params, tiny_cfg


def test_process_collector_gives_the_inline_run_exactly_and_resumes_exactly(tmp_path):
    """Same seed: the collector process with overlapped updates (stopped half way, resumed from the
    checkpoint) and the single-process, single-thread path (the previous trainer's schedule) store
    the same episodes and end with the same weights, although the policy learns and plans between
    cycles."""
    inline = Trainer(tiny_cfg(6, collector="inline", overlap_updates=False), tmp_path / "inline")
    inline.train(show_progress=False)

    first = Trainer(tiny_cfg(3, collector="process", overlap_updates=True), tmp_path / "process")
    first.train(show_progress=False)
    assert first.progress.collector_cpu_s > 0
    del first
    resumed = Trainer.resume(tmp_path / "process", total_env_steps=6 * 100)
    assert resumed._pending is not None  # the next cycle's episodes were collected before the stop
    resumed.train(show_progress=False)

    for name in ("obs", "ag", "goal", "action"):
        np.testing.assert_array_equal(getattr(inline.replay, name), getattr(resumed.replay, name), err_msg=name)
    a, b = params(inline), params(resumed)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert inline.rng.bit_generator.state == resumed.rng.bit_generator.state
    assert max(r["planned_fraction"] for r in resumed.progress.history) > 0  # it did plan
    assert inline.agent.optimizer_steps == resumed.agent.optimizer_steps > 0


def test_batched_planner_steps_match_one_call_per_env(tmp_path):
    trainer = Trainer(tiny_cfg(3, collector="inline"), tmp_path)
    trainer.train(show_progress=False)
    agent, env = trainer.agent, trainer.eval_env
    config = agent.cfg.planner.replace(local_horizon=0.0, d_max=1000.0)
    graph = LandmarkGraph(agent.landmarks(), agent.value_fn)
    obs = env.reset(list(range(len(env))))
    goals = obs["desired_goal"]
    batched = [EpisodePlanner(graph, g, agent.value_fn, config) for g in goals]
    single = [EpisodePlanner(agent.landmarks(), g, agent.value_fn, config) for g in goals]
    for _ in range(20):
        actions = planned_actions(batched, obs["observation"], agent)
        for i, p in enumerate(single):
            r = p.step(obs["observation"][i], agent.distance_fn, agent.act)
            np.testing.assert_allclose(actions[i], r.action, atol=1e-5)
        assert [p.replans for p in batched] == [p.replans for p in single]
        obs, _ = env.step(actions)
    assert len(single) < sum(p.replans for p in single) < 20 * len(single)  # re-plans and pursuits both happened


def test_a_failing_collector_raises_in_the_learner(tmp_path):
    trainer = Trainer(tiny_cfg(1, collector="process"), tmp_path)
    collector = ProcessCollector(trainer.cfg, trainer.agent)
    try:
        collector.submit(CollectRequest(seed=0, warmup=False, nodes=np.zeros((4, 7), np.float32)))  # wrong goal dim
        with pytest.raises(CollectorError, match="collector process failed:(.|\n)*Error"):
            collector.result()
    finally:
        collector.close()

"""The goal-env adapter: dims, seeded lockstep resets, the -1/0 reward convention, clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from l3p.sim.envs import UnknownEnvError, VecGoalEnv, make_env


def test_fetch_push_spec_and_seeded_resets():
    env = VecGoalEnv("FetchPush-v4", 2)
    assert (env.spec.obs_dim, env.spec.goal_dim, env.spec.action_dim, env.spec.max_steps) == (25, 3, 4, 50)
    a, b = env.reset([7, 8]), env.reset([7, 8])
    np.testing.assert_array_equal(a["desired_goal"], b["desired_goal"])
    assert not np.array_equal(a["desired_goal"][0], a["desired_goal"][1])   # different seeds, different goals
    obs, success = env.step(np.zeros((2, 4), np.float32))
    assert obs["observation"].shape == (2, 25) and obs["observation"].dtype == np.float32 and success.shape == (2,)
    env.close()


@pytest.mark.parametrize("env_id, far", [("FetchReach-v4", 0.2), ("PointMaze_UMaze-v3", 2.0)])
def test_reward_is_minus_one_until_the_goal_then_zero(env_id, far):
    env = VecGoalEnv(env_id, 1)
    g = np.zeros((3, env.spec.goal_dim), np.float32)
    ag = g.copy()
    ag[1, 0] += far
    ag[2, 0] += 0.01
    np.testing.assert_array_equal(env.compute_reward(ag, g), [0.0, -1.0, 0.0])
    env.close()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "FetchTeleport-v4"])
def test_unknown_or_unsupported_env_ids_are_clear_errors(env_id):
    with pytest.raises(UnknownEnvError, match=env_id):
        make_env(env_id)

"""The GPU learner's optimizer step in fixed shapes, checked on the CPU: the three parts a CUDA graph
captures (the update, the GLS refresh of the cluster batch, the clusters' ELBO step), run eagerly
here, give the CPU learner's step; their shapes depend on the config alone and they read nothing
back to the host (what capture needs). Captured against eager on a GPU: tests/test_scaling.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from l3p.sim.envs import EnvSpec
from l3p.training.agent import DEVICE_LOSSES, ClusterWork, L3PAgent
from l3p.training.config import TrainConfig
from l3p.training.gls import greedy_latent_sparsification, static_greedy_latent_sparsification
from l3p.training.replay import Batch

SPEC = EnvSpec("FetchReach-v4", 10, 3, 4, (-1.0,) * 4, (1.0,) * 4, 50)
CFG = TrainConfig(env_id="FetchReach-v4", hidden=32, layers=2, ae_hidden=16, latent_dim=4, n_landmarks=6,
                  cluster_batch=20, gls_sample=100, overlap_updates=False, grad_norm_clip=10.0)
# Each step's cluster work: (refresh, ELBO step), every combination, as the two schedules meet them.
WORK = [(True, True), (False, False), (False, True), (True, False), (True, True), (False, True)]


class NoHostReads(TorchFunctionMode):
    """Fails on any call that reads a tensor's value on the host (a sync a CUDA graph cannot hold)."""

    READS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.cpu, torch.Tensor.__bool__,
             torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__index__, torch.Tensor.nonzero,
             torch.nonzero}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.READS:
            raise AssertionError(f"reads a value on the host: {func.__name__}")
        return func(*args, **(kwargs or {}))


def agents(n: int = 2) -> list[L3PAgent]:
    """``n`` CPU agents in one state: normalizers fed, clusters initialized."""
    torch.manual_seed(0)
    first = L3PAgent(CFG, SPEC)
    rng = np.random.default_rng(0)
    first.o_norm.update(rng.normal(size=(4, 51, 10)).astype(np.float32))
    goals = rng.normal(size=(4, 51, 3)).astype(np.float32)
    first.g_norm.update(goals)
    first.init_clusters(goals.reshape(-1, 3)[:CFG.gls_sample], rng)
    out = [first]
    for _ in range(n - 1):
        out.append(L3PAgent(CFG, SPEC))
        out[-1].load_state_dict(first.state_dict())
    return out


def batch(rng: np.random.Generator, n: int = 32) -> Batch:
    f32 = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    return Batch(obs=f32(n, 10), obs_next=f32(n, 10), ag=f32(n, 3), ag_next=f32(n, 3), goal=f32(n, 3),
                 action=rng.uniform(-1, 1, size=(n, 4)).astype(np.float32),
                 reward=-(rng.random(n) > 0.3).astype(np.float32), failed=np.zeros(n, np.float32))


def tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v) for k, v in arrays.items() if v is not None}


@pytest.mark.parametrize("seed", range(4))
def test_the_static_gls_picks_what_the_host_gls_picks(seed):
    rng = np.random.default_rng(seed)
    latents = rng.normal(size=(300, 8)).astype(np.float32)
    first = int(rng.integers(300))
    for k in (1, 40, 300):
        host = greedy_latent_sparsification(latents, k, first=first)
        static = static_greedy_latent_sparsification(torch.as_tensor(latents), k, torch.tensor([float(first)]))
        assert static.dtype == torch.int64 and static.shape == (k,)
        np.testing.assert_array_equal(static.numpy(), host)


def test_the_static_gls_breaks_ties_as_the_host_gls_does():
    """Exact ties (points on an integer grid, duplicates, all points equal): the lowest index wins in both."""
    grid = np.stack(np.meshgrid(np.arange(5), np.arange(5)), -1).reshape(-1, 2).astype(np.float32)
    for latents in (grid, np.concatenate([grid, grid]), np.zeros((30, 4), np.float32)):
        for first in (0, 7):
            k = len(latents) // 2
            host = greedy_latent_sparsification(latents, k, first=first)
            static = static_greedy_latent_sparsification(torch.as_tensor(latents), k, torch.tensor([first]))
            np.testing.assert_array_equal(static.numpy(), host)
    with pytest.raises(ValueError, match="k must be in 1..25"):
        static_greedy_latent_sparsification(torch.as_tensor(grid), 26, torch.tensor([0]))


def test_the_device_parts_run_eagerly_give_the_cpu_step():
    """The same steps on the same batches and cluster work: the CPU learner's `update` (critic, V,
    AE, refresh, ELBO step, actor, GLS on the host) and the device parts run eagerly (update, then
    refresh, then ELBO step, GLS on tensors) end with the same losses, weights and cluster batch."""
    cpu, static = agents()
    assert static.capture_status() == {"update": "eager", "refresh": "eager", "clusters": "eager"}  # on the CPU
    rng = np.random.default_rng(1)
    for refresh, step in WORK:
        b = batch(rng)
        goals = rng.normal(size=(CFG.gls_sample, 3)).astype(np.float32)
        work = ClusterWork(refresh_goals=goals if refresh else None, refresh_first=int(rng.integers(CFG.gls_sample)),
                           step=step)
        row = cpu.update(b, work)
        inputs = tensors(static.refresh_inputs(work)) if refresh else None
        fixed, loss_clusters = static.static_update(tensors(vars(b)), inputs, step)
        np.testing.assert_allclose(fixed.numpy(), [row[k] for k in DEVICE_LOSSES], rtol=1e-5)
        assert (loss_clusters is None) == ("loss_clusters" not in row)
        if step:
            assert loss_clusters.item() == pytest.approx(row["loss_clusters"], rel=1e-5)
        torch.testing.assert_close(static.cluster_batch, cpu.cluster_batch)
    for name, module in cpu.modules().items():
        for (key, a), b in zip(module.state_dict().items(), static.modules()[name].state_dict().values()):
            torch.testing.assert_close(b, a, msg=f"{name}.{key}")


def test_the_refresh_keeps_its_shapes_and_memory_whatever_the_goals():
    """Spread, identical, nearly identical or huge goals: the cluster batch is rewritten in place, in
    the same shape (a captured graph reads that memory), starting from the goal at the given index."""
    (agent,) = agents(1)
    memory, shape = agent.cluster_batch.data_ptr(), agent.cluster_batch.shape
    rng = np.random.default_rng(2)
    spread = rng.normal(size=(CFG.gls_sample, 3)).astype(np.float32)
    for goals in (spread, np.ones_like(spread), 1 + 1e-6 * spread, 1e4 * spread):
        work = ClusterWork(refresh_goals=goals, refresh_first=5)
        agent.static_update(tensors(vars(batch(rng))), tensors(agent.refresh_inputs(work)), False)
        assert agent.cluster_batch.data_ptr() == memory and agent.cluster_batch.shape == shape == (20, 4)
        with torch.no_grad():
            torch.testing.assert_close(agent.cluster_batch[0], agent.ae.encode(torch.as_tensor(goals[5:6]))[0])
    with pytest.raises(ValueError, match=r"takes \(100, 3\) goals \(gls_sample x goal_dim\), got \(99, 3\)"):
        agent.refresh_inputs(ClusterWork(refresh_goals=spread[:99]))


def test_the_device_parts_read_nothing_back_to_the_host():
    """What lets a CUDA graph capture them: no value goes to the host (the host GLS, by contrast, does)."""
    (agent,) = agents(1)
    rng = np.random.default_rng(3)
    goals = rng.normal(size=(CFG.gls_sample, 3)).astype(np.float32)
    work = ClusterWork(refresh_goals=goals, refresh_first=1, step=True)
    with NoHostReads():
        for _ in range(2):  # the second time with every optimizer's state in place
            agent.static_update(tensors(vars(batch(rng))), tensors(agent.refresh_inputs(work)), True)
    with pytest.raises(AssertionError, match="reads a value on the host"), NoHostReads():
        agent.gls_indices(goals, CFG.cluster_batch, rng)

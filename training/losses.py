"""The L3P losses, each a pure function of networks and a batch of tensors."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from l3p.training.networks import Actor, DistanceCritic, GoalAutoEncoder, LatentClusters, ValueNet, q_from_distance


def critic_loss(critic: DistanceCritic, critic_targ: DistanceCritic, actor_targ: Actor, obs, goal, action,
                reward, obs_next, failed, gamma: float, clip_return: float) -> torch.Tensor:
    """MSE on Q = −(1 − γ^D)/(1 − γ) against r + γ·Q_targ(s', π_targ(s', g), g), clamped to [−clip_return, 0].
    No terminal mask: these tasks never terminate, and the goal region is absorbing in expectation.
    A transition into a failed state (``failed`` 1: the robot fell and cannot get up) targets the
    absorbing failure instead, −1/(1 − γ) (never reaching any goal), whatever its goal and reward."""
    with torch.no_grad():
        q_next = q_from_distance(critic_targ(obs_next, goal, actor_targ(obs_next, goal)), gamma)
        target = torch.clamp(reward + gamma * q_next, -clip_return, 0.0)
        q_fail = max(-1.0 / (1.0 - gamma), -clip_return)
        target = torch.lerp(target, torch.full_like(target, q_fail), failed)
    q = q_from_distance(critic(obs, goal, action), gamma)
    return F.mse_loss(q, target)


def offline_critic_loss(critic: DistanceCritic, critic_targ: DistanceCritic, obs, goal, action, reward, obs_next,
                        action_next, failed, gamma: float, clip_return: float, expectile: float) -> torch.Tensor:
    """In-sample critic for recorded data: expectile regression of Q(s, a, g) onto
    r + γ·Q_targ(s', a', g), with a' the action the data took next, never one the actor proposes.

    An upper expectile (``expectile`` > 0.5) leans toward the better of the continuations the data
    holds from similar states, so Q approaches the best in-data return without evaluating
    out-of-data actions (IQL, Kostrikov et al. 2022; OGBench's GCIQL/GCIVL learn their values so)."""
    with torch.no_grad():
        q_next = q_from_distance(critic_targ(obs_next, goal, action_next), gamma)
        target = torch.clamp(reward + gamma * q_next, -clip_return, 0.0)
        q_fail = max(-1.0 / (1.0 - gamma), -clip_return)
        target = torch.lerp(target, torch.full_like(target, q_fail), failed)
    diff = target - q_from_distance(critic(obs, goal, action), gamma)
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return (weight * diff ** 2).mean()


def offline_actor_loss(actor: Actor, critic: DistanceCritic, obs, goal, action, bc_mask, gamma: float,
                       bc_alpha: float) -> torch.Tensor:
    """Behaviour-regularized actor (TD3+BC, Fujimoto & Gu 2021): maximize λ·Q(s, π(s,g), g) while
    staying near the data's action, λ = α / mean|Q| so the two terms keep their ratio whatever the
    scale of Q. The behaviour term counts only where the goal came from the same trajectory
    (``bc_mask``): there the recorded action led toward it; for a random goal it did not."""
    pi = actor(obs, goal)
    q = q_from_distance(critic(obs, goal, pi), gamma)
    lam = bc_alpha / q.abs().mean().detach().clamp(min=1e-6)
    bc = (((pi - action) / actor.action_max) ** 2).sum(-1)
    return -lam * q.mean() + (bc_mask * bc).sum() / bc_mask.sum().clamp(min=1.0)


def actor_loss(actor: Actor, critic: DistanceCritic, obs, goal, gamma: float, action_l2: float) -> torch.Tensor:
    """Maximize Q(s, π(s,g), g) with an L2 penalty on the (scaled) action."""
    action = actor(obs, goal)
    q = q_from_distance(critic(obs, goal, action), gamma)
    return -q.mean() + action_l2 * ((action / actor.action_max) ** 2).mean()


@torch.no_grad()
def value_target(critic: DistanceCritic, obs, goal, action) -> torch.Tensor:
    """Stop-grad D(s_t, a_t, g): what V(ag_{t+1}, g) regresses onto."""
    return critic(obs, goal, action)


def value_loss(value: ValueNet, ag_next, goal, target: torch.Tensor, failed) -> torch.Tensor:
    """Regress V(ag_{t+1}, g) onto ``value_target``: the goal-space distance after the step. Failed
    transitions are left out: a fallen robot's distance says nothing about the place it lies."""
    keep = 1.0 - failed
    return (keep * (value(ag_next, goal) - target) ** 2).sum() / keep.sum().clamp(min=1.0)


def autoencoder_loss(ae: GoalAutoEncoder, value: ValueNet, ag, goal, lam: float) -> torch.Tensor:
    """½ recon(ag) + ½ recon(g) + λ·(‖f_E(ag) − f_E(g)‖² − ½(V(ag,g) + V(g,ag)))².

    The reachability term makes squared latent distance track the symmetrized value, so clustering
    in latent space groups goals that are few steps apart."""
    # ag and g go through each network as one stacked batch (one call per network, not two).
    both = torch.cat([ag, goal])
    z = ae.encode(both)
    recon = F.mse_loss(ae.decode_normalized(z), ae.g_norm(both))  # = ½ recon(ag) + ½ recon(g): equal halves
    with torch.no_grad():
        v_ag_g, v_g_ag = value(both, torch.cat([goal, ag])).chunk(2)
        v_sym = 0.5 * (v_ag_g + v_g_ag)
    z_a, z_g = z.chunk(2)
    latent_sq = ((z_a - z_g) ** 2).sum(-1)
    return recon + lam * ((latent_sq - v_sym) ** 2).mean()


def cluster_loss(clusters: LatentClusters, z: torch.Tensor) -> torch.Tensor:
    """Negative ELBO: −E_q[log N(z | c_k, σ)] + KL(q(c|z) ‖ uniform), q the softmax posterior."""
    log_lik = clusters.log_likelihood(z)
    log_q = torch.log_softmax(log_lik, dim=-1)
    q = log_q.exp()
    n = log_lik.shape[-1]
    expected_ll = (q * log_lik).sum(-1)
    kl = (q * (log_q + torch.log(torch.full((), float(n), device=q.device)))).sum(-1)
    return (kl - expected_ll).mean()

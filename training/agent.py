"""The L3P agent: networks, optimizers and one optimization step over every learned piece."""
from __future__ import annotations

import copy

import numpy as np
import torch

from training import losses
from training.config import TrainConfig
from training.envs import EnvSpec
from training.gls import greedy_latent_sparsification
from training.networks import (Actor, DistanceCritic, DistanceWithPolicy, GoalAutoEncoder, LatentClusters,
                               ValueNet)
from training.normalizer import Normalizer
from training.replay import Batch


class L3PAgent:
    def __init__(self, cfg: TrainConfig, spec: EnvSpec):
        self.cfg, self.spec = cfg, spec
        norm = dict(eps=cfg.norm_eps, clip_obs=cfg.clip_obs, clip_norm=cfg.clip_norm)
        self.o_norm = Normalizer(spec.obs_dim, **norm)
        self.g_norm = Normalizer(spec.goal_dim, **norm)
        dims = (spec.obs_dim, spec.goal_dim, spec.action_dim, spec.action_max)
        self.actor = Actor(self.o_norm, self.g_norm, *dims, hidden=cfg.hidden, layers=cfg.layers)
        self.critic = DistanceCritic(self.o_norm, self.g_norm, *dims, hidden=cfg.hidden, layers=cfg.layers)
        self.value = ValueNet(self.g_norm, spec.goal_dim, hidden=cfg.hidden, layers=cfg.layers)
        self.ae = GoalAutoEncoder(self.g_norm, spec.goal_dim, cfg.latent_dim, cfg.ae_hidden)
        self.clusters = LatentClusters(cfg.n_landmarks, cfg.latent_dim)
        self.pi_distance = DistanceWithPolicy(self.actor, self.critic)  # the planner's one batched call
        # Targets share the live normalizers (deepcopy would freeze a stale copy of the statistics).
        self.actor_targ = _target_copy(self.actor)
        self.critic_targ = _target_copy(self.critic)
        self.opt_actor = torch.optim.Adam(self.actor.net.parameters(), lr=cfg.lr_actor, fused=True)
        self.opt_critic = torch.optim.Adam(self.critic.net.parameters(), lr=cfg.lr_critic, fused=True)
        self.opt_value = torch.optim.Adam(self.value.net.parameters(), lr=cfg.lr_value, fused=True)
        self.opt_ae = torch.optim.Adam(self.ae.parameters(), lr=cfg.lr_ae, fused=True)
        self.opt_clusters = torch.optim.Adam(self.clusters.parameters(), lr=cfg.lr_clusters, fused=True)
        self.optimizer_steps = 0
        self.clusters_ready = False
        self._cluster_batch: torch.Tensor | None = None

    # ----- acting -----
    @torch.no_grad()
    def act(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        return self.actor(torch.tensor(obs), torch.tensor(goal)).numpy()

    @torch.no_grad()
    def distance_fn(self, obs: np.ndarray, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d, a = self.pi_distance(torch.tensor(obs), torch.tensor(goals))
        return d.numpy(), a.numpy()

    @torch.no_grad()
    def value_fn(self, goal_a: np.ndarray, goal_b: np.ndarray) -> np.ndarray:
        # Copies: the planner passes read-only and broadcast views, which torch cannot wrap.
        return self.value(torch.tensor(goal_a, dtype=torch.float32), torch.tensor(goal_b, dtype=torch.float32)).numpy()

    @torch.no_grad()
    def landmarks(self) -> np.ndarray:
        """Decoded centroids f_D(c_k): the graph's nodes, in goal space."""
        return self.ae.decode(self.clusters.centroids).numpy()

    # ----- learning -----
    def update(self, b: Batch) -> dict[str, float]:
        cfg = self.cfg
        t = {k: torch.as_tensor(v) for k, v in vars(b).items()}
        loss_c = losses.critic_loss(self.critic, self.critic_targ, self.actor_targ, t["obs"], t["goal"], t["action"],
                                    t["reward"], t["obs_next"], cfg.gamma, cfg.clip_return)
        _step(self.opt_critic, loss_c)
        loss_a = losses.actor_loss(self.actor, self.critic, t["obs"], t["goal"], cfg.gamma, cfg.action_l2)
        _step(self.opt_actor, loss_a)
        loss_v = losses.value_loss(self.value, self.critic, t["obs"], t["ag_next"], t["goal"], t["action"])
        _step(self.opt_value, loss_v)
        loss_ae = losses.autoencoder_loss(self.ae, self.value, t["ag"], t["goal"], cfg.ae_lambda)
        _step(self.opt_ae, loss_ae)
        out = {"loss_critic": loss_c.item(), "loss_actor": loss_a.item(), "loss_value": loss_v.item(),
               "loss_ae": loss_ae.item()}
        self.optimizer_steps += 1
        return out

    def refresh_cluster_batch(self, replay_goals: np.ndarray, rng: np.random.Generator) -> None:
        """Pick the latents the clusters train on: ``cluster_batch`` GLS-spread replay goals."""
        self._cluster_batch = self.gls_latents(replay_goals, self.cfg.cluster_batch, rng)

    def cluster_step(self) -> float:
        """One ELBO step on the current GLS-picked batch of latents."""
        loss = losses.cluster_loss(self.clusters, self._cluster_batch)
        _step(self.opt_clusters, loss)
        return loss.item()

    @torch.no_grad()
    def gls_indices(self, goals: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """Indices of ``k`` goals spread out in latent space (Greedy Latent Sparsification)."""
        z = self.ae.encode(torch.as_tensor(goals)).numpy()
        return greedy_latent_sparsification(z, min(k, len(goals)), rng)

    @torch.no_grad()
    def gls_latents(self, goals: np.ndarray, k: int, rng: np.random.Generator) -> torch.Tensor:
        return self.ae.encode(torch.as_tensor(goals[self.gls_indices(goals, k, rng)]))

    @torch.no_grad()
    def init_clusters(self, replay_goals: np.ndarray, rng: np.random.Generator) -> None:
        """Centroids start at N GLS-picked latents; the std at the latents' spread."""
        z = self.gls_latents(replay_goals, self.cfg.n_landmarks, rng)
        self.clusters.centroids.copy_(z)
        spread = self.ae.encode(torch.as_tensor(replay_goals)).std(0).clamp(min=1e-3)
        self.clusters.log_std.copy_(torch.log(spread / np.sqrt(self.cfg.n_landmarks)))
        self.refresh_cluster_batch(replay_goals, rng)
        self.clusters_ready = True

    @torch.no_grad()
    def update_targets(self) -> None:
        p = self.cfg.polyak
        for net, targ in ((self.actor, self.actor_targ), (self.critic, self.critic_targ)):
            for w, w_t in zip(net.net.parameters(), targ.net.parameters()):
                w_t.mul_(p).add_((1 - p) * w)

    # ----- persistence -----
    def modules(self) -> dict[str, torch.nn.Module]:
        return {"o_norm": self.o_norm, "g_norm": self.g_norm, "actor": self.actor, "critic": self.critic,
                "value": self.value, "ae": self.ae, "clusters": self.clusters, "actor_targ": self.actor_targ,
                "critic_targ": self.critic_targ}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.opt_actor, "critic": self.opt_critic, "value": self.opt_value, "ae": self.opt_ae,
                "clusters": self.opt_clusters}

    def state_dict(self) -> dict:
        return {"modules": {k: m.state_dict() for k, m in self.modules().items()},
                "optimizers": {k: o.state_dict() for k, o in self.optimizers().items()},
                "optimizer_steps": self.optimizer_steps, "clusters_ready": self.clusters_ready,
                "cluster_batch": self._cluster_batch}

    def load_state_dict(self, state: dict) -> None:
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers().items():
            o.load_state_dict(state["optimizers"][k])
        self.optimizer_steps = state["optimizer_steps"]
        self.clusters_ready = state["clusters_ready"]
        self._cluster_batch = state["cluster_batch"]


def _target_copy(net: torch.nn.Module) -> torch.nn.Module:
    targ = copy.deepcopy(net)
    targ.o_norm, targ.g_norm = net.o_norm, net.g_norm  # share the live statistics
    for p in targ.net.parameters():
        p.requires_grad_(False)
    return targ


def _step(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    # Gradients for this optimizer's parameters only: the actor's loss runs through the critic,
    # whose weight gradients would be computed and then thrown away (~1/3 of its backward pass).
    loss.backward(inputs=[p for group in opt.param_groups for p in group["params"]])
    opt.step()

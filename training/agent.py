"""The L3P agent: networks, optimizers and one optimization step over every learned piece.

An optimizer step has two halves that share no parameter either one writes:
- the policy half: the distance critic D, then the actor (and, when due, the targets);
- the landmark-model half: V regressed onto D (its target taken from the critic right after the
  critic's step), the reachability autoencoder, and the latent clusters.
With ``cfg.overlap_updates`` the landmark-model half of step k runs in a second thread while this
one goes on with step k's actor and the next steps' critics and actors: both cores learn, and every
network sees exactly the inputs and weights of the sequential order, so the losses and the whole
run are the same (tests/test_learning_units.py, tests/test_collector.py).

On a GPU (``cfg.device``) the networks, normalizer statistics and the step live on the device, in
fixed shapes and three parts, each captured as its own CUDA graph (training/device.py) and replayed
when due: every step's update (both halves but the clusters), the GLS refresh of the cluster batch
(every ``cluster_refresh_every`` steps: farthest-point picks among uploaded replay goals, on the
device) and the ELBO step of the clusters (every ``cluster_every``). The losses are read once per
cycle (``drain``), not per step.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from l3p.training import losses
from l3p.training.config import TrainConfig
from l3p.training.device import BatchUploader, GraphedStep, resolve_device
from l3p.sim.envs import EnvSpec
from l3p.training.gls import greedy_latent_sparsification, static_greedy_latent_sparsification
from l3p.training.networks import (Actor, DistanceCritic, DistanceWithPolicy, GoalAutoEncoder, LatentClusters,
                               ValueNet)
from l3p.training.normalizer import Normalizer
from l3p.training.replay import Batch


DEVICE_LOSSES = ("loss_critic", "loss_actor", "loss_value", "loss_ae")
"""The losses of the device step, in the order it stacks them."""

log = logging.getLogger(__name__)


@dataclass
class ClusterWork:
    """The cluster part of one optimizer step. The trainer decides it and draws its randomness in
    the order of the sequential loop, so running it in another thread changes no random stream."""
    refresh_goals: np.ndarray | None = None  # re-pick the cluster batch by GLS among these replay goals,
    refresh_first: int = 0                   # starting from this one
    step: bool = False                       # one ELBO step on the cluster batch


class L3PAgent:
    def __init__(self, cfg: TrainConfig, spec: EnvSpec, device: str | None = None):
        """``device`` overrides ``cfg.device`` (rollout workers and export act on the CPU)."""
        self.cfg, self.spec = cfg, spec
        self.device = resolve_device(cfg.device if device is None else device)
        norm = dict(eps=cfg.norm_eps, clip_obs=cfg.clip_obs, clip_norm=cfg.clip_norm)
        self.o_norm = Normalizer(spec.obs_dim, **norm)
        self.g_norm = Normalizer(spec.goal_dim, **norm)
        dims = (spec.obs_dim, spec.goal_dim, spec.action_dim, spec.action_max)
        self.actor = Actor(self.o_norm, self.g_norm, *dims, hidden=cfg.hidden, layers=cfg.layers)
        self.critic = DistanceCritic(self.o_norm, self.g_norm, *dims, hidden=cfg.hidden, layers=cfg.layers,
                                     layer_norm=cfg.layer_norm)
        self.value = ValueNet(self.g_norm, spec.goal_dim, hidden=cfg.hidden, layers=cfg.layers, layer_norm=cfg.layer_norm)
        self.ae = GoalAutoEncoder(self.g_norm, spec.goal_dim, cfg.latent_dim, cfg.ae_hidden)
        self.clusters = LatentClusters(cfg.n_landmarks, cfg.latent_dim)
        self.pi_distance = DistanceWithPolicy(self.actor, self.critic)  # the planner's one batched call
        # Built (and so initialized) on the CPU, then moved: a seed gives the same weights on any device.
        for m in (self.actor, self.critic, self.value, self.ae, self.clusters):
            m.to(self.device)
        # Targets share the live normalizers (deepcopy would freeze a stale copy of the statistics).
        self.actor_targ = _target_copy(self.actor)
        self.critic_targ = _target_copy(self.critic)
        on_gpu = self.device.type == "cuda"
        # Capturable: Adam's step count and bias correction stay on the device, so a graph can replay them.
        self._capturable = on_gpu and cfg.cuda_graph
        adam = dict(fused=True, capturable=self._capturable)
        self.opt_actor = torch.optim.Adam(self.actor.net.parameters(), lr=cfg.lr_actor, **adam)
        self.opt_critic = torch.optim.Adam(self.critic.net.parameters(), lr=cfg.lr_critic, **adam)
        self.opt_value = torch.optim.Adam(self.value.net.parameters(), lr=cfg.lr_value, **adam)
        self.opt_ae = torch.optim.Adam(self.ae.parameters(), lr=cfg.lr_ae, **adam)
        self.opt_clusters = torch.optim.Adam(self.clusters.parameters(), lr=cfg.lr_clusters, **adam)
        # The second learner thread uses the CPU's second core; a GPU runs the step as one stream.
        self._overlap = cfg.overlap_updates and not on_gpu
        self._upload = BatchUploader(self.device) if on_gpu else None
        self._upload_refresh = BatchUploader(self.device) if on_gpu else None
        self._graphed = self._graph_parts() if self._capturable else None
        if on_gpu and not cfg.cuda_graph:
            log.info("CUDA graph off (cuda_graph=false): the optimizer step runs eagerly")
        self._device_losses: list[tuple[torch.Tensor, torch.Tensor | None]] = []  # read at drain()
        self.optimizer_steps = 0
        self.clusters_ready = False
        self._cluster_batch: torch.Tensor | None = None
        self._landmark_thread: ThreadPoolExecutor | None = None  # created at the first overlapped step
        self._landmark_steps: list[Future] = []                   # submitted, losses not collected yet

    # ----- acting -----
    @torch.no_grad()
    def act(self, obs: np.ndarray, goal: np.ndarray) -> np.ndarray:
        return self.actor(self._tensor(obs), self._tensor(goal)).cpu().numpy()

    @torch.no_grad()
    def distance_fn(self, obs: np.ndarray, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d, a = self.pi_distance(self._tensor(obs), self._tensor(goals))
        return d.cpu().numpy(), a.cpu().numpy()

    @torch.no_grad()
    def value_fn(self, goal_a: np.ndarray, goal_b: np.ndarray) -> np.ndarray:
        self._wait()
        # Copies: the planner passes read-only and broadcast views, which torch cannot wrap.
        return self.value(self._tensor(goal_a, torch.float32), self._tensor(goal_b, torch.float32)).cpu().numpy()

    @torch.no_grad()
    def landmarks(self) -> np.ndarray:
        """Decoded centroids f_D(c_k): the graph's nodes, in goal space."""
        self._wait()
        return self.ae.decode(self.clusters.centroids).cpu().numpy()

    def _tensor(self, x: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        """A copy of ``x`` on the learner's device."""
        return torch.tensor(x, dtype=dtype, device=self.device)

    # ----- learning -----
    def update(self, b: Batch, clusters: ClusterWork | None = None) -> dict[str, float]:
        """One optimizer step of every learned piece. Returns the losses known now: all of them, or,
        with ``cfg.overlap_updates``, the policy half's (the landmark half's come from ``drain``)."""
        cfg = self.cfg
        if self.device.type != "cpu":
            return self._update_on_device(b, clusters)
        t = {k: torch.as_tensor(v) for k, v in vars(b).items() if v is not None}
        loss_c = self._critic_loss(t)
        _step(self.opt_critic, loss_c, self.cfg.grad_norm_clip)
        v_target = losses.value_target(self.critic, t["obs"], t["goal"], t["action"])  # D after its step
        clusters = clusters if self.clusters_ready and clusters is not None else ClusterWork()
        if self._overlap:
            if self._landmark_thread is None:
                self._landmark_thread = ThreadPoolExecutor(1, thread_name_prefix="l3p-landmarks",
                                                           initializer=torch.set_num_threads,
                                                           initargs=(cfg.torch_threads,))
            self._landmark_steps.append(self._landmark_thread.submit(self._landmark_step, t, v_target, clusters))
            out = {}
        else:
            out = self._landmark_step(t, v_target, clusters)
        loss_a = self._actor_loss(t)
        _step(self.opt_actor, loss_a, self.cfg.grad_norm_clip)
        self.optimizer_steps += 1
        return {"loss_critic": loss_c.item(), "loss_actor": loss_a.item(), **out}

    def _critic_loss(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """Online: bootstrap through the target actor. Offline (a dataset): only through recorded actions."""
        cfg = self.cfg
        if cfg.dataset is None:
            return losses.critic_loss(self.critic, self.critic_targ, self.actor_targ, t["obs"], t["goal"], t["action"],
                                      t["reward"], t["obs_next"], t["failed"], cfg.gamma, cfg.clip_return)
        return losses.offline_critic_loss(self.critic, self.critic_targ, t["obs"], t["goal"], t["action"], t["reward"],
                                          t["obs_next"], t["action_next"], t["failed"], cfg.gamma, cfg.clip_return,
                                          cfg.expectile)

    def _actor_loss(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        cfg = self.cfg
        if cfg.dataset is None:
            return losses.actor_loss(self.actor, self.critic, t["obs"], t["goal"], cfg.gamma, cfg.action_l2)
        return losses.offline_actor_loss(self.actor, self.critic, t["obs"], t.get("actor_goal", t["goal"]),
                                         t["action"], t["bc_mask"], cfg.gamma, cfg.bc_alpha)

    def _landmark_step(self, t: dict[str, torch.Tensor], v_target: torch.Tensor, clusters: ClusterWork) -> dict:
        loss_v, loss_ae = self._value_and_ae_steps(t, v_target)
        out = {"loss_value": loss_v.item(), "loss_ae": loss_ae.item()}
        loss = self._cluster_step(clusters)
        if loss is not None:
            out["loss_clusters"] = loss.item()
        return out

    def _value_and_ae_steps(self, t: dict[str, torch.Tensor], v_target: torch.Tensor) -> tuple[torch.Tensor, ...]:
        loss_v = losses.value_loss(self.value, t["ag_next"], t["goal"], v_target, t["failed"])
        _step(self.opt_value, loss_v, self.cfg.grad_norm_clip)
        loss_ae = losses.autoencoder_loss(self.ae, self.value, t["ag"], t["goal"], self.cfg.ae_lambda)
        _step(self.opt_ae, loss_ae, self.cfg.grad_norm_clip)
        return loss_v, loss_ae

    def _cluster_step(self, clusters: ClusterWork) -> torch.Tensor | None:
        """The cluster part on the CPU (its GLS refresh reads the autoencoder, so it comes after the
        AE step; the picks are made on the host)."""
        if clusters.refresh_goals is not None:
            self._set_cluster_batch(self._gls_latents(clusters.refresh_goals, self.cfg.cluster_batch,
                                                      first=clusters.refresh_first))
        return self._elbo_step({}) if clusters.step else None

    # ----- the device step: fixed shapes, each part replayed as a CUDA graph -----
    def _update_on_device(self, b: Batch, clusters: ClusterWork | None) -> dict[str, float]:
        """The GPU step: the batch (and, when a refresh is due, its goals) uploaded, then
        `static_update`. Losses stay on the device until ``drain``."""
        clusters = clusters if self.clusters_ready and clusters is not None else ClusterWork()
        t = self._upload({k: v for k, v in vars(b).items() if v is not None})
        refresh = None if clusters.refresh_goals is None else self._upload_refresh(self.refresh_inputs(clusters))
        self._device_losses.append(self.static_update(t, refresh, clusters.step))
        self.optimizer_steps += 1
        return {}

    def static_update(self, t: dict[str, torch.Tensor], refresh: dict[str, torch.Tensor] | None,
                      cluster_step: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One optimizer step from tensors, every part in fixed shapes: the update; the GLS refresh
        (``refresh``: its goals and start index, when due), which reads the autoencoder after its
        step; the ELBO step (when due), on the refreshed batch. The order of the CPU step but for the
        actor, whose step shares nothing with the cluster part. Returns the stacked update losses
        and the cluster loss (None without a cluster step)."""
        fixed = self._part("update")(t)
        if refresh is not None:
            self._part("refresh")(refresh)
        return fixed, self._part("clusters")({}) if cluster_step else None

    @property
    def cluster_batch(self) -> torch.Tensor | None:
        """The latents the ELBO steps fit (GLS-picked, re-picked every ``cluster_refresh_every`` steps)."""
        return self._cluster_batch

    def capture_status(self) -> dict[str, str]:
        """Each device part's state: "captured", "warming up" (its eager calls before the capture),
        why it runs eagerly for good, or "eager" (on the CPU, or with cuda_graph off)."""
        if self._graphed is None:
            return {name: "eager" for name in self._part_functions()}
        return {name: "captured" if g.graph is not None else g.eager_reason or "warming up"
                for name, g in self._graphed.items()}

    def _part(self, name: str) -> Callable[[dict[str, torch.Tensor]], torch.Tensor]:
        """A device part: its CUDA graph (captured after its eager warm-up calls), or the plain function."""
        return self._graphed[name] if self._graphed is not None else self._part_functions()[name]

    def _part_functions(self) -> dict[str, Callable[[dict[str, torch.Tensor]], torch.Tensor]]:
        """The device step's parts, in the order they run."""
        return {"update": self._device_step, "refresh": self._refresh_step, "clusters": self._elbo_step}

    def _graph_parts(self) -> dict[str, GraphedStep]:
        return {name: GraphedStep(step, self.device, name=f"{name} part of the optimizer step")
                for name, step in self._part_functions().items()}

    def refresh_inputs(self, clusters: ClusterWork) -> dict[str, np.ndarray]:
        """A refresh's host inputs in their fixed shapes: ``gls_sample`` goals and the start index
        (a float32 beside them in the one upload; exact below 2**24)."""
        goals = clusters.refresh_goals
        expected = (self.cfg.gls_sample, self.spec.goal_dim)
        if goals.shape != expected:
            raise ValueError(f"a GLS refresh on the device takes {expected} goals (gls_sample x goal_dim), "
                             f"got {goals.shape}")
        return {"goals": goals, "first": np.array([clusters.refresh_first], np.float32)}

    @torch.no_grad()
    def _refresh_step(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The GLS refresh in fixed shapes: the cluster batch becomes the encodings of the goals that
        `static_greedy_latent_sparsification` picks (written in place: a graph reads its memory)."""
        goals = inputs["goals"]
        k = min(self.cfg.cluster_batch, goals.shape[0])
        picks = static_greedy_latent_sparsification(self.ae.encode(goals), k, inputs["first"])
        self._set_cluster_batch(self.ae.encode(goals.index_select(0, picks)))
        return picks

    def _elbo_step(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """One ELBO step of the latent clusters on the cluster batch (no inputs: the batch is state)."""
        loss = losses.cluster_loss(self.clusters, self._cluster_batch)
        _step(self.opt_clusters, loss, self.cfg.grad_norm_clip)
        return loss.detach()

    def _set_cluster_batch(self, z: torch.Tensor) -> None:
        """Copied into the batch's memory when the shape is the same (the graphs hold that memory)."""
        if self._cluster_batch is not None and self._cluster_batch.shape == z.shape:
            self._cluster_batch.copy_(z)
        else:
            self._cluster_batch = z.detach().clone()

    def _device_step(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """The update part: critic, V, autoencoder and actor steps; their losses stacked (the halves
        touch disjoint parameters, so running V and the AE before the actor changes no result)."""
        cfg = self.cfg
        loss_c = self._critic_loss(t)
        _step(self.opt_critic, loss_c, cfg.grad_norm_clip)
        v_target = losses.value_target(self.critic, t["obs"], t["goal"], t["action"])
        loss_v, loss_ae = self._value_and_ae_steps(t, v_target)
        loss_a = self._actor_loss(t)
        _step(self.opt_actor, loss_a, cfg.grad_norm_clip)
        return torch.stack([loss_c, loss_a, loss_v, loss_ae]).detach()

    def drain(self) -> list[dict[str, float]]:
        """Wait for the overlapped landmark-model steps (on a GPU: for the device); their losses,
        in step order."""
        if self._device_losses:
            steps, self._device_losses = self._device_losses, []
            rows = []
            for fixed, cluster in steps:
                row = dict(zip(DEVICE_LOSSES, fixed.tolist()))
                if cluster is not None:
                    row["loss_clusters"] = cluster.item()
                rows.append(row)
            return rows
        steps, self._landmark_steps = self._landmark_steps, []
        return [f.result() for f in steps]  # re-raises a failed step's exception here

    def _wait(self) -> None:
        """Reading V, the autoencoder or the clusters needs their pending steps done."""
        for f in self._landmark_steps:
            f.exception()  # blocks until done; the losses (or the error) stay for drain()

    def cluster_work(self, replay, rng: np.random.Generator) -> ClusterWork:
        """The cluster part of the next optimizer step (two independent schedules: a
        fresh GLS batch every ``cluster_refresh_every`` optimizer steps, a step every ``cluster_every``)."""
        if not self.clusters_ready:
            return ClusterWork()
        n, cfg = self.optimizer_steps + 1, self.cfg
        work = ClusterWork(step=n % cfg.cluster_every == 0)
        if n % cfg.cluster_refresh_every == 0:
            work.refresh_goals = replay.sample_goals(cfg.gls_sample, rng)
            work.refresh_first = int(rng.integers(len(work.refresh_goals)))
        return work

    def gls_indices(self, goals: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """Indices of ``k`` goals spread out in latent space (Greedy Latent Sparsification)."""
        self._wait()
        return self._gls_indices(goals, k, rng)

    @torch.no_grad()
    def _gls_indices(self, goals: np.ndarray, k: int, rng: np.random.Generator | None = None,
                     first: int | None = None) -> np.ndarray:
        z = self.ae.encode(torch.as_tensor(goals, device=self.device)).cpu().numpy()
        return greedy_latent_sparsification(z, min(k, len(goals)), rng, first)

    @torch.no_grad()
    def _gls_latents(self, goals: np.ndarray, k: int, rng: np.random.Generator | None = None,
                     first: int | None = None) -> torch.Tensor:
        return self.ae.encode(torch.as_tensor(goals[self._gls_indices(goals, k, rng, first)], device=self.device))

    @torch.no_grad()
    def init_clusters(self, replay_goals: np.ndarray, rng: np.random.Generator) -> None:
        """Centroids start at N GLS-picked latents; the std at the latents' spread."""
        self._wait()
        z = self._gls_latents(replay_goals, self.cfg.n_landmarks, rng)
        self.clusters.centroids.copy_(z)
        spread = self.ae.encode(torch.as_tensor(replay_goals, device=self.device)).std(0).clamp(min=1e-3)
        self.clusters.log_std.copy_(torch.log(spread / np.sqrt(self.cfg.n_landmarks)))
        self._set_cluster_batch(self._gls_latents(replay_goals, self.cfg.cluster_batch, rng))
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

    def state_dict(self, optimizers: bool = True) -> dict:
        """Everything training needs to continue; ``optimizers=False``: the weights alone (a third
        of the size), enough to act and to export, not to resume."""
        self._wait()
        state = {"modules": {k: m.state_dict() for k, m in self.modules().items()},
                 "optimizer_steps": self.optimizer_steps, "clusters_ready": self.clusters_ready,
                 "cluster_batch": None if self._cluster_batch is None else self._cluster_batch.clone()}
        if optimizers:
            state["optimizers"] = {k: o.state_dict() for k, o in self.optimizers().items()}
        return state

    def load_state_dict(self, state: dict) -> None:
        """From a checkpoint written on any device (tensors are copied onto this agent's); a state
        without optimizers leaves them as they are."""
        self._wait()
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers().items() if "optimizers" in state else ():
            o.load_state_dict(state["optimizers"][k])
            for group in o.param_groups:  # the saved flag is the writer's device's; capturable needs CUDA
                group["capturable"] = self._capturable
        self.optimizer_steps = state["optimizer_steps"]
        self.clusters_ready = state["clusters_ready"]
        batch = state["cluster_batch"]
        self._cluster_batch = None if batch is None else batch.to(self.device, copy=True)
        if self._graphed is not None:  # the optimizer state and cluster batch tensors are new: capture again
            self._graphed = self._graph_parts()

    def on_cpu(self) -> "L3PAgent":
        """This agent, or a CPU copy of it (export traces the networks on the CPU)."""
        if self.device.type == "cpu":
            return self
        agent = L3PAgent(self.cfg, self.spec, device="cpu")
        agent.load_state_dict(self.state_dict())
        return agent


def _target_copy(net: torch.nn.Module) -> torch.nn.Module:
    targ = copy.deepcopy(net)
    targ.o_norm, targ.g_norm = net.o_norm, net.g_norm  # share the live statistics
    for p in targ.net.parameters():
        p.requires_grad_(False)
    return targ


def _step(opt: torch.optim.Optimizer, loss: torch.Tensor, max_norm: float | None = None) -> None:
    """One step of ``opt`` on ``loss``; with ``max_norm``, its gradient (over all of this
    optimizer's parameters together) is first rescaled to at most that L2 norm."""
    opt.zero_grad(set_to_none=True)
    params = [p for group in opt.param_groups for p in group["params"]]
    # Gradients for this optimizer's parameters only: the actor's loss runs through the critic,
    # whose weight gradients would be computed and then thrown away (~1/3 of its backward pass).
    loss.backward(inputs=params)
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    opt.step()

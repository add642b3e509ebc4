"""Episode collection: one episode on every env per request, acting with the actor or the planner.

The trainer submits a request for the next cycle's episodes (a seed, warm-up or not, the planner's
graph nodes) right after storing the current cycle's, then runs its optimizer steps. Two
collectors run the same `collect` on the weights the learner had at submission:

- ``InlineCollector`` collects at once, in the trainer's process (tests, single-core machines);
- ``ProcessCollector`` collects in a child process (torch.multiprocessing, spawn) that owns the
  envs and reads the acting networks from shared memory, so env stepping and its inference run on
  one core while the optimizer steps run on the other. Transitions come back through a pipe (a
  FetchPush cycle is ~100 kB); the replay stays in the learner.

Both see the same weights, seeds and graph for each request, so they fill the replay with the
same episodes (tests/test_collector.py). gymnasium's AsyncVectorEnv was not used: it puts each env
in a process but leaves inference, and so the per-step round trip, in the learner's.
"""
from __future__ import annotations

import signal
import time
import traceback
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.multiprocessing as mp

from l3p.core import DISTANCE, EpisodePlanner, LandmarkGraph
from l3p.core.seeds import TRAIN_HIGH
from l3p.sim.envs import VecGoalEnv
from l3p.training.config import TrainConfig


@dataclass
class CollectRequest:
    seed: int                   # the cycle's random stream: env seeds, noise, planned envs, subgoal draws
    warmup: bool                # uniform random actions
    nodes: np.ndarray | None    # planner graph nodes (landmarks + GLS extras); None: no planned episodes


@dataclass
class Episodes:
    """One cycle's whole episodes (obs and achieved goals have T+1 entries) and how they went."""
    obs: np.ndarray             # [n, T+1, obs_dim]
    ag: np.ndarray              # [n, T+1, goal_dim]
    goal: np.ndarray            # [n, goal_dim]
    action: np.ndarray          # [n, T, action_dim]
    warmup: bool
    train_success: float
    planned_fraction: float
    cpu_s: float                # CPU time of the collecting process, for utilisation reports

    def state_dict(self) -> dict:
        """Tensors and plain numbers, so a checkpoint loads with torch.load(weights_only=True)."""
        return {f.name: torch.from_numpy(v) if isinstance(v := getattr(self, f.name), np.ndarray) else v
                for f in fields(self)}

    @classmethod
    def from_state_dict(cls, state: dict) -> "Episodes":
        return cls(**{k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in state.items()})


def planned_actions(planners: list[EpisodePlanner], obs: np.ndarray, agent) -> np.ndarray:
    """One step of every planner: all re-plans in one distance call, all subgoal pursuits in one
    actor call (a planner's `step` would make one call per env)."""
    needs = [p.prepare(o) for p, o in zip(planners, obs)]
    outputs: list = [None] * len(needs)
    for fn in {need.fn for need in needs}:
        rows = [i for i, need in enumerate(needs) if need.fn == fn]
        obs_in = np.concatenate([needs[i].obs for i in rows])
        goals_in = np.concatenate([needs[i].goals for i in rows])
        ends = np.cumsum([len(needs[i].obs) for i in rows])
        if fn == DISTANCE:
            d, a = agent.distance_fn(obs_in, goals_in)
            parts = zip(np.split(d, ends[:-1]), np.split(a, ends[:-1]))
        else:
            parts = np.split(agent.act(obs_in, goals_in), ends[:-1])
        for i, part in zip(rows, parts):
            outputs[i] = part
    return np.stack([p.complete(out).action for p, out in zip(planners, outputs)])


def collect(agent, env: VecGoalEnv, cfg: TrainConfig, request: CollectRequest) -> Episodes:
    """One episode on every env: uniform random during warm-up, else the actor with exploration noise
    or, on a ``plan_eps`` fraction of envs when ``request.nodes`` is given, the noise-free planner.
    ``agent`` needs only ``act``, ``distance_fn`` and ``value_fn``."""
    cpu0 = time.process_time()
    rng = np.random.default_rng(request.seed)
    spec = env.spec
    n, T = len(env), spec.max_steps
    obs_buf = np.zeros((n, T + 1, spec.obs_dim), np.float32)
    ag_buf = np.zeros((n, T + 1, spec.goal_dim), np.float32)
    act_buf = np.zeros((n, T, spec.action_dim), np.float32)
    obs = env.reset(rng.integers(0, TRAIN_HIGH, n).tolist())
    goal = obs["desired_goal"].copy()
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)

    planned: list[int] = []
    planners: list[EpisodePlanner] = []
    if request.nodes is not None and not request.warmup:
        # The nodes are the same for every planned env: their landmark-landmark block is solved once.
        graph = LandmarkGraph(request.nodes, agent.value_fn)
        pcfg = cfg.planner.replace(sample_subgoal=True, prune_failed=False)
        planned = np.flatnonzero(rng.random(n) < cfg.plan_eps).tolist()
        planners = [EpisodePlanner(graph, goal[i], agent.value_fn, pcfg, seed=int(rng.integers(2**31)))
                    for i in planned]

    for t in range(T):
        obs_buf[:, t], ag_buf[:, t] = obs["observation"], obs["achieved_goal"]
        if request.warmup:
            actions = rng.uniform(low, high, size=(n, spec.action_dim)).astype(np.float32)
        else:
            actions = agent.act(obs["observation"], goal)
            actions += cfg.noise_eps * spec.action_max * rng.standard_normal(actions.shape).astype(np.float32)
            actions = np.clip(actions, low, high)
            random_rows = rng.random(n) < cfg.random_eps
            actions[random_rows] = rng.uniform(low, high, size=(int(random_rows.sum()), spec.action_dim))
            if planners:  # planned actions are noise-free
                actions[planned] = planned_actions(planners, obs["observation"][planned], agent)
        act_buf[:, t] = actions
        obs, success = env.step(actions)
    obs_buf[:, T], ag_buf[:, T] = obs["observation"], obs["achieved_goal"]
    return Episodes(obs_buf, ag_buf, goal, act_buf, request.warmup, float(success.mean()), len(planned) / n,
                    time.process_time() - cpu0)


class CollectorError(RuntimeError):
    """The collector process failed (its traceback is in the message) or died."""


class InlineCollector:
    """Collects in the calling process, at submission."""

    def __init__(self, cfg: TrainConfig, env: VecGoalEnv, agent):
        self.cfg, self.env, self.agent = cfg, env, agent
        self._episodes: Episodes | None = None

    def submit(self, request: CollectRequest) -> None:
        self._episodes = collect(self.agent, self.env, self.cfg, request)

    def result(self) -> Episodes:
        episodes, self._episodes = self._episodes, None
        return episodes

    def close(self, wait: bool = True) -> None:
        pass


def acting_state(agent) -> dict[str, torch.Tensor]:
    """What collection reads from the agent: actor, critic and V with their normalizers."""
    return {f"{name}.{k}": v for name in ("actor", "critic", "value")
            for k, v in agent.modules()[name].state_dict().items()}


class ProcessCollector:
    """Collects in a child process while the caller learns; weights are copied into shared memory
    at each submission (the child reads them before it starts collecting)."""

    def __init__(self, cfg: TrainConfig, agent):
        self.agent = agent
        ctx = mp.get_context("spawn")  # fork would copy a torch runtime that may hold thread pools
        self._weights = {k: v.detach().clone().share_memory_() for k, v in acting_state(agent).items()}
        self._conn, child_conn = ctx.Pipe()
        self._proc = ctx.Process(target=_collector_main, args=(cfg, child_conn, self._weights), daemon=True,
                                 name="l3p-collector")
        self._proc.start()
        child_conn.close()
        self.pid = self._proc.pid

    def submit(self, request: CollectRequest) -> None:
        with torch.no_grad():
            for k, v in acting_state(self.agent).items():
                self._weights[k].copy_(v)
        self._conn.send(request)

    def result(self) -> Episodes:
        try:
            reply = self._conn.recv()
        except EOFError:
            self._proc.join(timeout=5)
            raise CollectorError(f"the collector process exited (code {self._proc.exitcode})") from None
        if isinstance(reply, str):
            raise CollectorError(f"the collector process failed:\n{reply}")
        return reply

    def close(self, wait: bool = True) -> None:
        """Stop the child: after its current request (``wait``), or at once (the learner is aborting)."""
        if wait:
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._conn.close()


def _collector_main(cfg: TrainConfig, conn, weights: dict[str, torch.Tensor]) -> None:
    from l3p.training.agent import L3PAgent

    # The learner decides when to stop (after the current cycle, with a checkpoint): a Ctrl-C sent to
    # the whole process group must not kill the collection it waits for.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(1)  # the other core is the learner's
    env = VecGoalEnv(cfg.env_id, cfg.n_envs, cfg.max_episode_steps)
    agent = L3PAgent(cfg, env.spec)
    modules = agent.modules()
    try:
        while (request := conn.recv()) is not None:
            try:
                for name in ("actor", "critic", "value"):
                    prefix = f"{name}."
                    modules[name].load_state_dict({k[len(prefix):]: v for k, v in weights.items()
                                                   if k.startswith(prefix)})
                reply = collect(agent, env, cfg, request)
            except Exception:  # reported to the learner, which raises it
                reply = traceback.format_exc()
            conn.send(reply)
    except (EOFError, OSError):  # the learner is gone (or went while we answered)
        pass
    finally:
        env.close()

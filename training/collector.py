"""Episode collection: one episode on every env per request, acting with the actor or the planner.

The trainer submits a request for the next cycle's episodes (a seed, warm-up or not, the planner's
graph nodes) right after storing the current cycle's, then runs its optimizer steps. The
collectors run the same `collect` on the weights the learner had at submission:

- ``InlineCollector`` collects at once, in the trainer's process (tests, single-core machines);
- ``ProcessCollector`` collects in ``collectors`` child processes (torch.multiprocessing, spawn),
  each owning its share of the envs and reading the acting networks from shared memory, so env
  stepping and its inference run on their own cores while the optimizer steps run on the
  learner's. Transitions come back through a pipe (a FetchPush cycle is ~100 kB); the one replay
  stays in the learner;
- ``RayCollector`` (training/ray_collector.py): the same workers as Ray actors, on any node of a
  Ray cluster.

Inline and one worker see the same weights, seeds and graph for each request, so they fill the
replay with the same episodes (tests/test_collector.py); N workers give one run per seed and N.
gymnasium's AsyncVectorEnv was not used: it puts each env in a process but leaves inference, and
so the per-step round trip, in the learner's.
"""
from __future__ import annotations

import dataclasses
import signal
import time
import traceback
from dataclasses import dataclass, fields
from multiprocessing import connection as mp_connection

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
    cpu_s: float                # CPU time of the collecting process(es), for utilisation reports
    staleness: float = 0.0      # mean age of the weights collected on, in cycles beyond the synchronous schedule
    workers_replaced: int = 0   # dead workers replaced while collecting these

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
        planned = np.flatnonzero(rng.random(n) < cfg.plan_eps).tolist()
        # The nodes are the same for every planned env: their landmark-landmark block is solved once,
        # and not at all by a worker none of whose envs plans this cycle.
        graph = LandmarkGraph(request.nodes, agent.value_fn) if planned else None
        pcfg = cfg.planner.replace(sample_subgoal=True, prune_failed=False)
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
    """A rollout worker failed (its traceback is in the message) or died."""


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


def worker_envs(cfg: TrainConfig) -> list[int]:
    """How many of the cycle's ``n_envs`` envs each of the ``collectors`` workers steps."""
    n, k = cfg.n_envs, cfg.collectors
    return [n // k + (i < n % k) for i in range(k)]


def split_request(request: CollectRequest, workers: int) -> list[CollectRequest]:
    """One request per worker. One worker gets the request itself (the single-collector run); more
    get seeds drawn from it, so a run depends on the seed and the number of workers only."""
    if workers == 1:
        return [request]
    seeds = np.random.default_rng(request.seed).integers(2**62, size=workers)
    return [dataclasses.replace(request, seed=int(s)) for s in seeds]


def merge(parts: list[Episodes], staleness: list[int]) -> Episodes:
    """The workers' episodes as one cycle's, in worker order; ``staleness``: each part's weights'
    age in cycles beyond the synchronous schedule's."""
    if len(parts) == 1:
        return dataclasses.replace(parts[0], staleness=float(staleness[0]))
    n = np.array([len(p.goal) for p in parts], np.float64)
    return Episodes(
        obs=np.concatenate([p.obs for p in parts]), ag=np.concatenate([p.ag for p in parts]),
        goal=np.concatenate([p.goal for p in parts]), action=np.concatenate([p.action for p in parts]),
        warmup=all(p.warmup for p in parts),
        train_success=float(np.dot(n, [p.train_success for p in parts]) / n.sum()),
        planned_fraction=float(np.dot(n, [p.planned_fraction for p in parts]) / n.sum()),
        cpu_s=sum(p.cpu_s for p in parts), staleness=float(np.dot(n, staleness) / n.sum()),
        workers_replaced=sum(p.workers_replaced for p in parts))


class RolloutWorker:
    """A worker's own envs and acting networks (on the CPU); ``collect`` loads the learner's weights,
    then collects one episode per env. The same class runs in a worker process and as a Ray actor."""

    def __init__(self, cfg: TrainConfig, n_envs: int):
        from l3p.training.agent import L3PAgent  # the agent imports this module

        torch.set_num_threads(1)  # one core per worker; the learner has its own
        self.cfg = cfg
        self.env = VecGoalEnv(cfg.env_id, n_envs, cfg.max_episode_steps)
        self.agent = L3PAgent(cfg, self.env.spec, device="cpu")
        self._modules = self.agent.modules()

    def collect(self, weights: dict, request: CollectRequest) -> Episodes:
        for name in ("actor", "critic", "value"):
            prefix = f"{name}."
            self._modules[name].load_state_dict({k[len(prefix):]: torch.as_tensor(v) for k, v in weights.items()
                                                 if k.startswith(prefix)})
        return collect(self.agent, self.env, self.cfg, request)

    def close(self) -> None:
        self.env.close()


class WorkerPool:
    """``cfg.collectors`` rollout workers sharing each cycle's envs. Synchronous by default: every
    submission goes to every worker and ``result`` waits for all of them. With ``max_staleness``
    k > 0 a busy worker keeps its request, and ``result`` takes the workers that are done (at least
    one), waiting only for those whose weights would otherwise grow more than k cycles old.
    Subclasses move the weights, requests and replies."""

    def __init__(self, cfg: TrainConfig, agent):
        self.cfg, self.agent = cfg, agent
        self.workers = cfg.collectors
        self._submissions = 0
        self._busy: dict[int, int] = {}  # worker -> the submission whose weights it collects on

    def submit(self, request: CollectRequest) -> None:
        idle = [i for i in range(self.workers) if i not in self._busy]
        if idle:
            parts = split_request(request, self.workers)
            self._publish(idle)
            for i in idle:
                self._send(i, parts[i])
                self._busy[i] = self._submissions
        self._submissions += 1

    def result(self) -> Episodes:
        latest = self._submissions - 1
        age = {i: latest - v for i, v in self._busy.items()}
        due = sorted(i for i, a in age.items() if a >= self.cfg.max_staleness)
        done = set(due) | set(self._ready([i for i in self._busy if i not in due], block=not due))
        order = sorted(done)
        parts = [self._recv(i) for i in order]
        for i in order:
            del self._busy[i]
        return merge(parts, [age[i] for i in order])

    def close(self, wait: bool = True) -> None:
        raise NotImplementedError

    # What a subclass provides.
    def _publish(self, workers: list[int]) -> None:
        """Make the agent's current acting weights readable by these (idle) workers."""
        raise NotImplementedError

    def _send(self, worker: int, request: CollectRequest) -> None:
        raise NotImplementedError

    def _ready(self, workers: list[int], block: bool) -> list[int]:
        """Those of ``workers`` with a reply waiting (with ``block``, at least one)."""
        raise NotImplementedError

    def _recv(self, worker: int) -> Episodes:
        raise NotImplementedError


class ProcessCollector(WorkerPool):
    """Workers in child processes (torch.multiprocessing, spawn) while the caller learns. Each has
    its own shared-memory copy of the acting weights, written just before its request is sent, so a
    worker never reads weights being overwritten (and, with staleness, busy workers keep theirs)."""

    def __init__(self, cfg: TrainConfig, agent):
        super().__init__(cfg, agent)
        ctx = mp.get_context("spawn")  # fork would copy a torch runtime that may hold thread pools
        state = acting_state(agent)
        self._weights, self._conns, self._procs = [], [], []
        for i, n_envs in enumerate(worker_envs(cfg)):
            weights = {k: v.detach().to("cpu", copy=True).share_memory_() for k, v in state.items()}
            conn, child_conn = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, args=(cfg, n_envs, child_conn, weights), daemon=True,
                               name=f"l3p-collector-{i}")
            proc.start()
            child_conn.close()
            self._weights.append(weights)
            self._conns.append(conn)
            self._procs.append(proc)
        self.pids = [p.pid for p in self._procs]
        self.pid = self.pids[0]

    def _publish(self, workers: list[int]) -> None:
        with torch.no_grad():
            for k, v in acting_state(self.agent).items():
                host = v.to("cpu")  # one device-to-host copy per cycle, then one memcpy per worker
                for i in workers:
                    self._weights[i][k].copy_(host)

    def _send(self, worker: int, request: CollectRequest) -> None:
        self._conns[worker].send(request)

    def _ready(self, workers: list[int], block: bool) -> list[int]:
        conns = [self._conns[i] for i in workers]
        ready = mp_connection.wait(conns, timeout=None if block else 0) if conns else []
        return [i for i in workers if self._conns[i] in ready]

    def _recv(self, worker: int) -> Episodes:
        try:
            reply = self._conns[worker].recv()
        except (EOFError, ConnectionResetError):
            self._procs[worker].join(timeout=5)
            raise CollectorError(f"worker {worker}: the collector process exited "
                                 f"(code {self._procs[worker].exitcode})") from None
        if isinstance(reply, str):
            raise CollectorError(f"worker {worker}: the collector process failed:\n{reply}")
        return reply

    def close(self, wait: bool = True) -> None:
        """Stop the workers: after their current requests (``wait``), or at once (the learner is aborting)."""
        if wait:
            for conn in self._conns:
                try:
                    conn.send(None)
                except (BrokenPipeError, OSError):
                    pass
            for proc in self._procs:
                proc.join(timeout=30)
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns:
            conn.close()


def _worker_main(cfg: TrainConfig, n_envs: int, conn, weights: dict[str, torch.Tensor]) -> None:
    # The learner decides when to stop (after the current cycle, with a checkpoint): a Ctrl-C sent to
    # the whole process group must not kill the collection it waits for.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    worker = RolloutWorker(cfg, n_envs)
    try:
        while (request := conn.recv()) is not None:
            try:
                reply = worker.collect(weights, request)
            except Exception:  # reported to the learner, which raises it
                reply = traceback.format_exc()
            conn.send(reply)
    except (EOFError, OSError):  # the learner is gone (or went while we answered)
        pass
    finally:
        worker.close()

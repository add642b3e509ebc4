"""Compare planner modes on the same episodes of any served goal env.

``l3p eval --server HOST:PORT --env FetchPush-v4 --episodes 50 --modes l3p,naive,policy
--out results.json``
``l3p eval --server HOST:PORT --pairs far --episodes 100
--modes l3p,l3p@search=hard,naive,policy``   (a maze: fixed far start/goal pairs)
``l3p eval --config eval.toml --out results.json``   (options from a file; the command line wins)

Every mode (a variant ``MODE[@key=value...]``, see ``l3p.clients.runner``) replays episodes
``seed + i`` (by default the held-out range; same initial states, goals, maze pairs and planner seeds). The table and the JSON
report, per variant: success rate with a Wilson 95% interval, mean final distance to the goal,
re-plans per episode and per-step latency p50/p99; for a robot that can fall over (the ant), the
episodes in which it fell.
"""

from __future__ import annotations

import datetime
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from l3p.clients.client import ModelInfo, PlannerClient
from l3p.clients.run_config import EvalConfig, seeds_text
from l3p.clients.results import EpisodeResult
from l3p.clients.runner import (
    RunResult,
    check_env,
    connect,
    episode_protocol,
    open_env,
    run_episodes,
)
from l3p.core.errors import INTERRUPTED
from l3p.sim import mazes
from l3p.sim.render import close_env

Z95 = 1.959963984540054  # standard normal 97.5% quantile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (default 95%).

    Unlike the normal approximation it stays inside [0, 1] and is informative at 0/n and n/n,
    which small evaluations hit often. ``n == 0`` gives the uninformative (0, 1).
    """
    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # The bounds are exactly 0 at 0/n and 1 at n/n; pin them against rounding noise.
    lo = 0.0 if successes == 0 else max(0.0, center - half)
    hi = 1.0 if successes == n else min(1.0, center + half)
    return lo, hi


def summarize(run: RunResult) -> dict[str, Any]:
    n, k = len(run.episodes), sum(run.successes)
    lo, hi = wilson_interval(k, n)
    tasks = sorted({e.task for e in run.episodes if e.task is not None})
    per_task = {}
    for t in tasks:  # OGBench reports per task: successes and Wilson interval of each
        hits = [e.success for e in run.episodes if e.task == t]
        per_task[str(t)] = {"episodes": len(hits), "successes": sum(hits), "success_rate": sum(hits) / len(hits),
                            "success_ci95": list(wilson_interval(sum(hits), len(hits)))}
    return {
        "episodes": n,
        "successes": k,
        "success_rate": k / n if n else float("nan"),
        "success_ci95": [lo, hi],
        "reached": run.reached,
        "mean_final_distance": run.mean_final_distance,
        "replans_per_episode": run.replans_per_episode,
        "resumes": run.resumes,
        "latency_ms": {"p50": run.latency_p50_ms, "p99": run.latency_p99_ms},
        **({} if run.falls is None else {"falls": run.falls}),
        **({"tasks": per_task} if per_task else {}),
        "per_episode": [e.to_dict() for e in run.episodes],
    }


def evaluate(
    client: PlannerClient,
    info: ModelInfo,
    env_id: str,
    *,
    modes: Sequence[str],
    episodes: int,
    seed: int,
    stream: bool = False,
    force_env: bool = False,
    progress: bool = True,
    pairs: str = "random",
    min_cells: int = mazes.MIN_FAR_CELLS,
    max_steps: int | None = None,
    task: int | None = None,
) -> dict[str, Any]:
    """Run every mode over the same episodes (``max_steps`` long, default the env's limit; far
    pairs ``min_cells`` apart; evaluation tasks: all in turn, or ``task``); the JSON-ready report,
    with a row per task besides the whole when the episodes ran on tasks."""
    env = open_env(env_id, max_steps=max_steps)
    try:
        warnings = check_env(info, env_id, env, force=force_env)
        for w in warnings:
            print(f"WARNING: {w} -- running anyway (--force-env)", file=sys.stderr)
        bar = _progress(total=len(modes) * episodes, enabled=progress)
        runs: dict[str, RunResult] = {}
        interrupted = False
        try:
            for mode in modes:
                bar.set_description(mode)
                run = runs[mode] = RunResult(env_id=env_id, mode=mode, stream=stream, episodes=[])

                def finished(episode: EpisodeResult, run: RunResult = run) -> None:
                    run.episodes.append(episode)
                    bar.update(1)

                run_episodes(client, env, env_id, episodes=episodes, seed=seed, mode=mode, stream=stream,
                             pairs=pairs, min_cells=min_cells, task=task, on_episode=finished)
        except KeyboardInterrupt:  # Ctrl-C: report the episodes that finished (the session ended)
            interrupted = True
        finally:
            bar.close()
        max_steps = int(env.spec.max_episode_steps)
    finally:
        close_env(env)
    return {
        "env_id": env_id,
        "server": client.target,
        "model": {"env_id": info.env_id, "bundle_sha256": info.bundle_sha256,
                  "n_landmarks": info.n_landmarks, "format_version": info.format_version},
        "episodes": episodes,
        "seed": seed,
        "seeds": [seed + i for i in range(episodes)],
        "pairs": pairs,
        **({"min_cells": min_cells} if pairs == "far" else {}),
        **({"task": task} if task is not None else {}),
        "max_steps": max_steps,
        "stream": stream,
        "warnings": warnings,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **({"interrupted": True} if interrupted else {}),
        "modes": {mode: summarize(run) for mode, run in runs.items() if run.episodes},
    }


def _progress(total: int, enabled: bool) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm comes with [sim]; run without a bar if absent
        enabled = False
    if not enabled:
        class _Silent:
            def update(self, n: int = 1) -> None: ...
            def set_description(self, _desc: str) -> None: ...
            def close(self) -> None: ...
        return _Silent()
    # disable=None: a bar only on a terminal, never carriage-return frames in a log or a pipe.
    return tqdm(total=total, unit="episode", file=sys.stderr, leave=False, disable=None)


def format_table(report: dict[str, Any]) -> str:
    can_fall = any("falls" in m for m in report["modes"].values())
    rows = [("mode", "success", "95% CI", "final dist", "replans/ep", "p50 ms", "p99 ms", "resumes",
             *(("fell",) if can_fall else ()))]
    for mode, m in report["modes"].items():
        lo, hi = m["success_ci95"]
        rows.append((
            mode,
            f"{m['successes']}/{m['episodes']} ({m['success_rate']:.0%})",
            f"[{lo:.0%}, {hi:.0%}]",
            f"{m['mean_final_distance']:.3f}",
            f"{m['replans_per_episode']:.1f}",
            f"{m['latency_ms']['p50']:.2f}",
            f"{m['latency_ms']['p99']:.2f}",
            str(m["resumes"]),
            *((str(m.get("falls", "-")),) if can_fall else ()),
        ))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                       for c, (cell, w) in enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    far = (f" far start/goal pairs (>= {report['min_cells']} cells)," if report.get("pairs") == "far" else
           f" task {report['task']}," if "task" in report else
           " evaluation tasks in turn," if report.get("pairs") == "tasks" else "")
    title = (f"{report['env_id']}: {report['episodes']} episodes of {report['max_steps']} steps per mode,{far} "
             f"{seeds_text(report['seed'], report['episodes'])}{' (stream)' if report['stream'] else ''}"
             f"{'; interrupted: the episodes that finished' if report.get('interrupted') else ''}")
    return "\n".join([title, *lines, *_task_lines(report)])


def _task_lines(report: dict[str, Any]) -> list[str]:
    """Successes per evaluation task and mode, when the episodes ran on the env's tasks."""
    tasks = sorted({t for m in report["modes"].values() for t in m.get("tasks", {})}, key=int)
    if len(tasks) < 2:
        return []
    width = max(len(mode) for mode in report["modes"])
    lines = ["", "per task: " + "  ".join(f"task {t}".rjust(8) for t in tasks)]
    for mode, m in report["modes"].items():
        cells = [f"{m['tasks'][t]['successes']}/{m['tasks'][t]['episodes']}" if t in m.get("tasks", {}) else "-"
                 for t in tasks]
        lines.append(mode.ljust(max(width, 9)) + " " + "  ".join(c.rjust(8) for c in cells))
    return lines


def write_report(report: dict[str, Any], path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_jsonable(report), indent=2, allow_nan=False) + "\n")


def _jsonable(x: Any) -> Any:
    """NaN/Inf are not JSON: an empty run's statistics become null."""
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def run_eval(config: EvalConfig) -> int:
    """``l3p eval``: the table, and the JSON report with ``--out``; expected failures raise L3PError."""
    client, info, env_id = connect(config)
    try:
        protocol = episode_protocol(config, info.provenance, env_id)
        report = evaluate(client, info, env_id, modes=config.modes, episodes=config.episodes,
                          seed=config.seed, stream=config.stream, force_env=config.force_env,
                          progress=config.progress, pairs=protocol.pairs, min_cells=protocol.min_cells,
                          max_steps=protocol.max_steps, task=protocol.task)
    finally:
        client.close()
    print(format_table(report))
    if config.out:
        write_report(report, config.out)
        print(f"wrote {config.out}")
    if report.get("interrupted"):
        print("l3p eval: interrupted", file=sys.stderr)
        return INTERRUPTED
    return 0

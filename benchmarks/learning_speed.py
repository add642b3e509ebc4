"""Learning speed: success per env step of training runs side by side, e.g. the same preset and seed
with planning during collection and without (the paper's claim that planning helps the agent learn).

    l3p train --env l3p/FetchPlaceInsideBox-v0 --out runs/box
    l3p train --env l3p/FetchPlaceInsideBox-v0 --set plan_eps=0 --out runs/box-noplan
    python benchmarks/learning_speed.py runs/box runs/box-noplan --out speed.json --plot speed.png

Reads each run's progress.csv (its in-training evaluations: the env's evaluation variant, the same
fixed episodes at every point, policy alone and with the planner) and config.json. Runs are compared
over the env steps all of them reached, split into --segments equal spans: the mean success of the
evaluations in each span (a 20-episode point alone swings by +-0.2), the mean over the whole range
(the area under the curve per env step), and the env steps to first reach each rate. Wall times are
printed but are only comparable between runs that had the same cores to themselves.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from curves import MODES, first_reach, read_curve

MODE_LABELS = {"policy": "policy π(s, g)", "l3p": "L3P planner"}
RATES = (0.5, 0.8, 0.9)


def load_run(run_dir: Path) -> dict:
    for name in ("progress.csv", "config.json"):
        if not (run_dir / name).is_file():
            sys.exit(f"{run_dir}: no {name} (not a training run directory: `l3p train --out DIR` writes both)")
    config = json.loads((run_dir / "config.json").read_text())
    rows = read_curve(run_dir / "progress.csv")
    if not rows:
        sys.exit(f"{run_dir}: progress.csv has no evaluation yet")
    return {"run": str(run_dir), "env_id": config["env_id"], "seed": config["seed"], "plan_eps": config["plan_eps"],
            "eval_episodes": config["eval_episodes"], "label": f"{run_dir.name} (plan_eps {config['plan_eps']:g})",
            "rows": rows}


def span_mean(rows: list[dict], mode: str, lo: float, hi: float) -> dict:
    """Mean success of the evaluations with lo < env steps <= hi (unmeasured points left out)."""
    vals = [r[f"success_{mode}"] for r in rows if lo < r["env_steps"] <= hi and r[f"success_{mode}"] is not None]
    return {"mean": round(float(np.mean(vals)), 3) if vals else None, "evaluations": len(vals)}


def compare(runs: list[dict], segments: int) -> dict:
    common = min(run["rows"][-1]["env_steps"] for run in runs)
    edges = [round(common * k / segments) for k in range(segments + 1)]
    out = {"env_id": runs[0]["env_id"], "common_env_steps": common, "segments": edges, "runs": []}
    for run in runs:
        rows = [r for r in run["rows"] if r["env_steps"] <= common]
        last = rows[-1] if rows else {"wall_time_s": 0.0}
        entry = {k: run[k] for k in ("run", "label", "seed", "plan_eps", "eval_episodes")}
        entry["wall_s_to_common"] = last["wall_time_s"]
        entry["final_env_steps"] = run["rows"][-1]["env_steps"]
        reached = first_reach(rows, RATES)
        for mode in MODES:
            entry[mode] = {"spans": [span_mean(rows, mode, lo, hi) for lo, hi in zip(edges, edges[1:])],
                           "overall": span_mean(rows, mode, 0, common), "first_reach": reached[mode]}
        entry["curve"] = [{k: r[k] for k in ("env_steps", "wall_time_s", "success_policy", "success_l3p")}
                          for r in run["rows"]]
        out["runs"].append(entry)
    return out


def _steps(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n:.0f}"


def print_table(result: dict) -> None:
    edges = result["segments"]
    print(f"\nLearning speed, {result['env_id']}: mean in-training success per span of env steps, over the "
          f"{result['common_env_steps']:,} env steps every run reached")
    spans = [f"{_steps(lo)}-{_steps(hi)}" for lo, hi in zip(edges, edges[1:])]
    width = max(len(r["label"]) for r in result["runs"]) + 2
    print(f"{'run':<{width}}{'mode':<8}" + "".join(f"{s:>13}" for s in spans) + f"{'whole range':>13}"
          + "".join(f"{'first ' + str(t):>11}" for t in RATES))
    for run in result["runs"]:
        for mode in MODES:
            cells = [s["mean"] for s in run[mode]["spans"]] + [run[mode]["overall"]["mean"]]
            hits = [run[mode]["first_reach"][str(t)] for t in RATES]
            print(f"{run['label']:<{width}}{mode:<8}" + "".join(f"{'-' if c is None else f'{c:.2f}':>13}" for c in cells)
                  + "".join(f"{'-' if h is None else _steps(h['env_steps']):>11}" for h in hits))
    episodes = sorted({run["eval_episodes"] for run in result["runs"]})
    print(f"each span: the mean of its evaluations ({' or '.join(map(str, episodes))} fixed episodes each); "
          "first r: the first evaluation at or above r")
    for run in result["runs"]:
        print(f"{run['label']}: {run['wall_s_to_common'] / 60:.0f} min of training to "
              f"{result['common_env_steps']:,} env steps (seed {run['seed']}; {run['final_env_steps']:,} in all)")


def plot(result: dict, path: Path, smooth: int) -> None:
    """The modes side by side, at the width and text sizes of the cards' pictures (l3p.sim.draw)."""
    from matplotlib.ticker import EngFormatter

    from l3p.sim.draw import figure, wrapped

    with figure(path, 4.2, ncols=len(MODES), sharex=True, sharey=True) as (fig, axes):
        for ax, mode in zip(axes, MODES):
            for i, run in enumerate(result["runs"]):
                pts = [(r["env_steps"], r[f"success_{mode}"]) for r in run["curve"]
                       if r[f"success_{mode}"] is not None]
                if not pts:
                    continue
                x, y = np.array(pts, dtype=float).T
                ax.plot(x, y, ".", color=f"C{i}", alpha=0.25)
                k = min(smooth, len(y))  # trailing mean: each point sees only evaluations up to it
                ys = np.convolve(y, np.ones(k) / k, mode="valid")
                ax.plot(x[k - 1:], ys, color=f"C{i}", label=f"{run['label']} (mean of {k})")
            ax.axvline(result["common_env_steps"], color="0.6", linestyle=":", linewidth=1)
            ax.set_title(MODE_LABELS[mode])
            ax.set_xlabel("env steps")
            ax.xaxis.set_major_formatter(EngFormatter(sep=" "))
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("in-training eval success")
        fig.suptitle(wrapped(f"{result['env_id']}: learning speed"))
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=1, frameon=False)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, help="training run directories (l3p train --out DIR)")
    ap.add_argument("--replot", type=Path, metavar="JSON",
                    help="draw --plot from a result this benchmark wrote (--out), without the runs")
    ap.add_argument("--segments", type=int, default=5, help="equal spans of the common env steps")
    ap.add_argument("--smooth", type=int, default=5, help="plot: trailing mean over this many evaluations")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    ap.add_argument("--plot", type=Path, help="write the curves side by side as a PNG")
    args = ap.parse_args(argv)
    if args.segments < 1 or args.smooth < 1:
        ap.error("--segments and --smooth must be >= 1")
    if args.replot:
        if args.runs or not args.plot:
            ap.error("--replot JSON takes --plot PNG and no run directories")
        plot(json.loads(args.replot.read_text()), args.plot, args.smooth)
        print(f"wrote {args.plot}")
        return {}
    if not args.runs:
        ap.error("name the run directories to compare (or --replot JSON)")

    runs = [load_run(r) for r in args.runs]
    envs = {run["env_id"] for run in runs}
    if len(envs) > 1:
        ap.error(f"the runs train different envs ({', '.join(sorted(envs))}): success rates are not comparable")
    if len({run["seed"] for run in runs}) > 1:
        print("note: the runs have different seeds; a difference may be the seed's", file=sys.stderr)
    result = compare(runs, args.segments)
    print_table(result)
    if args.plot:
        plot(result, args.plot, args.smooth)
        print(f"wrote {args.plot}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

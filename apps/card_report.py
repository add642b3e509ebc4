"""The tables of a model card from an evaluation report, and reading the files a card is made from.

An evaluation report's table is rendered from the rows it holds. A report is the JSON ``l3p eval
--out`` writes (``modes``: one summary per variant). A benchmark with several evaluation tasks
(OGBench's five) may add per-task rows in either of two shapes, each rendered as a task x variant
table under the overall one:

- ``"tasks": {TASK: {"modes": {VARIANT: summary}}}`` (or a list of such objects with ``"task"``);
- ``"modes": {VARIANT: {..., "tasks": {TASK: summary}}}`` (or a list of summaries with ``"task"``).

When the report has per-task rows but no overall ``modes``, the overall row of each variant sums
its tasks' episodes and successes.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from l3p.core.config import OPTIONS
from l3p.core.errors import L3PError
from l3p.core.options import acting


class CardError(L3PError):
    """A model directory a card cannot be made from (missing or unreadable files)."""


# ---------------------------------------------------------------------------------------------
# Formatting


def spaced(n: int) -> str:
    """1200000 -> '1 200 000' (the docs' thousands separator)."""
    return f"{n:,}".replace(",", " ")


def duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    text = f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{seconds / 60:.1f} min"
    return f"{text} ({spaced(round(seconds))} s)"


def number(value: Any) -> str:
    """A planner option or config value as written in a command line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def replans(value: float) -> str:
    return f"{value:.0f}" if value >= 100 or float(value).is_integer() else f"{value:.1f}"


def distance(value: float) -> str:
    return f"{value:.3f}" if value < 0.1 else f"{value:.2f}"


def table(header: list[str], rows: list[list[str]], align: list[str]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# ---------------------------------------------------------------------------------------------
# Reading the files


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CardError(f"{path}: missing (a shipped model needs it for its card)") from None
    except (OSError, ValueError) as exc:
        raise CardError(f"{path}: not readable JSON ({str(exc).splitlines()[0]})") from None


def check_report(path: Path, report: Any) -> dict:
    if not isinstance(report, dict) or not (isinstance(report.get("modes"), dict) or report.get("tasks")):
        raise CardError(f"{path}: not an evaluation report (no 'modes' or 'tasks'; written by l3p eval --out)")
    for key in ("episodes", "seed"):
        if not isinstance(report.get(key), int):
            raise CardError(f"{path}: '{key}' is {report.get(key)!r}, expected an integer")
    return report


def task_rows(report: dict) -> list[tuple[str, dict[str, dict]]]:
    """[(task, {variant: summary})] in the report's order; [] without per-task rows."""
    tasks = report.get("tasks")
    if isinstance(tasks, dict):  # {task: {"modes": {variant: summary}}} or {task: {variant: summary}}
        return [(str(name), dict(t.get("modes", t))) for name, t in tasks.items()]
    if isinstance(tasks, list):
        return [(str(t.get("task", i + 1)), dict(t["modes"])) for i, t in enumerate(tasks)]
    rows: dict[str, dict[str, dict]] = {}
    for variant, summary in report.get("modes", {}).items():
        per_task = summary.get("tasks", summary.get("per_task"))
        items = per_task.items() if isinstance(per_task, dict) else (
            ((str(t.get("task", i + 1)), t) for i, t in enumerate(per_task)) if isinstance(per_task, list) else ())
        for name, row in items:
            rows.setdefault(str(name), {})[variant] = row
    return list(rows.items())


def overall(report: dict) -> dict[str, dict]:
    """{variant: summary} over all episodes (summed over tasks when the report has no ``modes``)."""
    if isinstance(report.get("modes"), dict) and report["modes"]:
        return report["modes"]
    totals: dict[str, dict] = {}
    for _, variants in task_rows(report):
        for variant, row in variants.items():
            total = totals.setdefault(variant, {"episodes": 0, "successes": 0})
            total["episodes"] += row["episodes"]
            total["successes"] += row["successes"]
    return totals



ALWAYS_SHOWN = ("search", "d_max", "local_horizon")


def variant_label(variant: str, planner: dict) -> str:
    """What a variant is, in words, from the bundle's served planner: its search, d_max and local
    horizon, then every other option it serves off the table's default that acts in mode l3p."""
    mode, _, overrides = variant.partition("@")
    if mode == "l3p" and not overrides:
        opts = [f"{planner.get('search', 'soft')} search", f"d_max {number(planner.get('d_max'))}",
                f"local horizon {number(planner.get('local_horizon'))}"]
        opts += [f"`{key}`" if OPTIONS[key].kind == "bool" else f"`{key}` {number(planner[key])}"
                 for key in acting(planner, OPTIONS, "l3p") if key not in ALWAYS_SHOWN]
        return f"`l3p` (served default: {', '.join(opts)})"
    if mode == "naive" and not overrides:
        return "`naive` (re-plan every step)"
    if mode == "policy" and not overrides:
        return "`policy` (π(s, g), no graph)"
    return f"`{variant}`"


def summary_row(label: str, row: dict, columns: list[str], bold: bool) -> list[str]:
    k, n = row["successes"], row["episodes"]
    success = f"{k} / {n}"
    cells = [label, f"**{success}**" if bold else success]
    for column in columns:
        if column == "ci":
            lo, hi = row["success_ci95"]
            cells.append(f"{round(100 * lo)} – {round(100 * hi)} %")
        elif column == "distance":
            cells.append(distance(row["mean_final_distance"]))
        elif column == "replans":
            cells.append(replans(row["replans_per_episode"]))
        elif column == "falls":
            cells.append(str(row["falls"]))
        elif column == "resumes":
            cells.append(str(row["resumes"]))
        elif column == "latency":
            cells.append(f"{row['latency_ms']['p50']:.2f} / {row['latency_ms']['p99']:.2f} ms")
    return cells


COLUMNS = (  # (name, report key, header): a column appears when every row has its key
    ("ci", "success_ci95", "95 % CI (Wilson)"),
    ("distance", "mean_final_distance", "mean final distance"),
    ("replans", "replans_per_episode", "re-plans / episode"),
    ("falls", "falls", "fell"),
    ("resumes", "resumes", "resumed"),
    ("latency", "latency_ms", "Act p50 / p99"),
)


def against_policy(row: dict, policy: dict) -> str | None:
    """'won / lost': episodes this variant succeeded in and the policy failed, and the reverse."""
    mine, theirs = row.get("per_episode"), policy.get("per_episode")
    if not (isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs)):
        return None
    if any(a.get("index") != b.get("index") for a, b in zip(mine, theirs)):
        return None
    won = sum(bool(a["success"]) and not b["success"] for a, b in zip(mine, theirs))
    lost = sum(bool(b["success"]) and not a["success"] for a, b in zip(mine, theirs))
    return f"{won} / {lost}"


def results_table(variants: dict[str, dict], planner: dict) -> list[str]:
    rows = list(variants.values())
    columns = [(name, header) for name, key, header in COLUMNS
               if rows and all(key in row for row in rows)
               and not (name == "resumes" and not any(row["resumes"] for row in rows))]
    header = ["variant", "success"] + [h for _, h in columns]
    body = [summary_row(variant_label(v, planner), row, [c for c, _ in columns], bold=(v == "l3p"))
            for v, row in variants.items()]
    policy = variants.get("policy")
    versus = [against_policy(row, policy) if policy and v != "policy" else "—" for v, row in variants.items()]
    if policy and len(variants) > 1 and None not in versus:
        header.append("vs `policy`: won / lost")
        body = [cells + [extra] for cells, extra in zip(body, versus)]
    return table(header, body, ["l"] + ["r"] * (len(header) - 1))


def task_cell(row: dict | None) -> str:
    if row is None:
        return "—"
    if "successes" in row and "episodes" in row:
        return f"{row['successes']} / {row['episodes']}"
    return f"{100 * row['success_rate']:.0f} %"


def tasks_table(report: dict) -> list[str]:
    rows = task_rows(report)
    if not rows:
        return []
    variants = list(dict.fromkeys(v for _, vs in rows for v in vs))
    body = [[f"task {name}" if name.isdigit() else name] + [task_cell(vs.get(v)) for v in variants]
            for name, vs in rows]
    return ["", "Per task (success):", ""] + table(["task"] + [f"`{v}`" for v in variants], body,
                                                    ["l"] + ["r"] * len(variants))

"""The planner's settings: `PlannerConfig`, whose fields are the option table (one row per option:
type, default, range, modes, what it makes do nothing, one line of doc; core/options.py says what
each column means). Everything else that lists options reads `OPTIONS`: the proto mapping, the
server's and the client's checks, the ``--planner KEY=VALUE`` and ``MODE[@KEY=VALUE...]`` parsers,
the command-line help, the planner API page (docs/planner_api.md) and the cards."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from l3p.core.commandline import did_you_mean
from l3p.core.names import MIN_TEMPERATURE, MODES, SEARCHES
from l3p.core.options import DeadOptionError, OptionValueError, dead_message, dead_pair, option_table, silenced
from l3p.core.options import planner_option as option
from l3p.core.overrides import parse_pair

# Pruning (prune_failed, prune_loops), in steps of the distance network: a landmark nearer than
# PRUNE_AT_STEPS is where the state is (no candidate); a subgoal whose counter ran out farther than
# max(PRUNE_MIN_STEPS, PRUNE_PROGRESS x D at its pick) was not reached.
PRUNE_AT_STEPS = 1.0
PRUNE_MIN_STEPS = 3.0
PRUNE_PROGRESS = 0.5
# prune_loops: a landmark picked again within this many re-plans, the way left no shorter, is a loop.
LOOP_REPLANS = 6

L3P = ("l3p",)
PICK = ("l3p", "naive")  # the modes that pick subgoals


@dataclass(frozen=True)
class PlannerConfig:
    """The planner's settings; ``d_sc``: D from the state to a candidate, ``d_cg``: a candidate's
    solved graph distance to the goal. Options beyond Algorithm 1 are off (or 1) by default."""

    mode: str = option("l3p", "l3p: Algorithm 1 (re-plan when the counter runs out, never re-picking the "
                       "subgoal replaced); naive: re-plan every step; policy: pi(obs, goal), no graph",
                       choices=MODES)
    d_max: float = option(15.0, "graph edges longer than this are cut, and D from the state beyond "
                          "local_cut x d_max (steps)")
    temperature: float = option(1.1, f"beta of the soft search and of sample_subgoal (>= {MIN_TEMPERATURE:g}; "
                                "search=hard is its exact limit)")
    search: str = option("soft", "shortest paths: soft (the paper's update, guarded: within a few steps of "
                         "exact), hard (exact Floyd-Warshall), expectation (the paper's update as written)",
                         choices=SEARCHES)
    search_iterations: int = option(20, "iterations of the soft and expectation searches", low=1, high=1000,
                                    per_episode=False)
    local_horizon: float = option(10.0, "the goal within this many steps by D: pursue it directly (0: never)",
                                  low_inclusive=True, modes=PICK)
    counter_extra: int = option(1, "steps added to the counter at each re-plan (as the reference code)",
                                per_episode=False, modes=L3P)
    sample_subgoal: bool = option(False, "sample the subgoal from softmax(-(d_sc + d_cg) / temperature) "
                                  "instead of taking the argmin", modes=PICK)
    adaptive_cut: bool = option(True, "a node keeps its nearest incoming edge even beyond d_max, so the graph "
                                "stays connected", per_episode=False)
    prune_failed: bool = option(False, f"a landmark subgoal still farther than max({PRUNE_MIN_STEPS:g}, "
                                f"{PRUNE_PROGRESS:g} x D at its pick) when its counter runs out is pruned for the "
                                f"episode; a landmark within {PRUNE_AT_STEPS:g} step is no candidate", modes=L3P)
    require_progress: bool = option(False, "a landmark is a candidate only if its d_cg is below the last "
                                    "landmark picked's", modes=L3P)
    local_cut: float = option(1.0, "D from the state beyond local_cut x d_max cuts a candidate (1: Algorithm "
                              "1); with follow_edges it only decides when pruning gives the graph back",
                              modes=PICK)
    follow_edges: bool = option(False, "the candidates are the landmark nearest the state by D and those the "
                                "graph's edges reach from it (and from the subgoal replaced, if reached), "
                                "whatever their D", modes=L3P)
    prune_loops: bool = option(False, f"a landmark picked again within {LOOP_REPLANS} re-plans, d_sc + d_cg "
                               f"not {PRUNE_MIN_STEPS:g} steps shorter, is pruned for the episode", modes=L3P)
    next_hop: bool = option(False, "re-plan every step: the subgoal is the next node on the graph's route "
                            "from the landmark nearest the state by D (no counter)", modes=L3P,
                            excludes=("counter_extra", "sample_subgoal", "prune_failed", "require_progress",
                                      "local_cut", "follow_edges", "prune_loops"))
    action_scale: float = option(1.0, "the actor's action times this, then clipped to the bundle's bounds "
                                 "(below 1: a gentler gait)")

    def validate(self, given: Collection[str] | None = None) -> None:
        """Raise ValueError naming the first field out of its range, or a setting that does nothing
        (DeadOptionError; ``given``: the names just set, which its message tells from the rest)."""
        values = vars(self)  # the fields, in the table's order
        for name, value in values.items():
            check(name, value)
        dead = dead_pair(values, OPTIONS)
        if dead is not None:
            on, off = dead
            raise DeadOptionError(dead_message(on, off, values, given), on.name, off.name)

    def replace(self, **overrides: Any) -> PlannerConfig:
        """A validated copy with ``overrides`` applied (unknown names raise TypeError). A setting here
        that an override makes do nothing takes its table default; one the overrides make do nothing
        raises DeadOptionError."""
        config = dataclasses.replace(self, **{**silenced(overrides, OPTIONS), **overrides})
        config.validate(given=overrides)
        return config

    def for_episode(self, **overrides: Any) -> PlannerConfig:
        """One episode's config: these defaults (a bundle's) with a request's ``overrides`` (the mode,
        or options that `EPISODE_OPTIONS` names), as `replace` applies them; each must also be in
        range and act in the episode's mode, else ValueError says why."""
        for name, value in overrides.items():
            if name != "mode" and name not in EPISODE_OPTIONS:
                raise TypeError(f"{name!r} is no per-episode planner option ({', '.join(EPISODE_OPTIONS)})")
            check(name, value)
        config = dataclasses.replace(self, **{**silenced(overrides, OPTIONS), **overrides})
        values = vars(config)
        for name, value in overrides.items():
            OPTIONS[name].check_acts(value, values, OPTIONS, overrides)
        config.validate(given=overrides)
        return config

    @property
    def local_d_max(self) -> float:
        """The cut of distances from the state: local_cut * d_max."""
        return self.local_cut * self.d_max

    @property
    def counter_cap(self) -> int:
        """Upper bound of the re-plan counter: ceil(d_max)."""
        return math.ceil(self.d_max)


OPTIONS = option_table(PlannerConfig)
"""The option table: name -> `l3p.core.options.Option`, in PlannerConfig's field order."""
EPISODE_OPTIONS = tuple(name for name, o in OPTIONS.items() if o.per_episode and name != "mode")
"""The overrides a client may send with an episode beside its mode (and seed)."""


def check(name: str, value: Any) -> None:
    """Raise OptionValueError unless ``value`` is in the option's range."""
    OPTIONS[name].check(value)
    if name == "temperature":
        check_temperature(value)


def check_temperature(temperature: float) -> None:
    OPTIONS["temperature"].check(temperature)
    if temperature < MIN_TEMPERATURE:
        raise OptionValueError("temperature", f">= {MIN_TEMPERATURE:g} (smaller values underflow the soft "
                               "search; search=hard is its exact limit)", temperature)


def parse_option(pair: str, allowed: Collection[str] = tuple(OPTIONS), flag: str | None = None) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (key, value parsed by its row and checked); ValueError names the allowed keys
    or the range."""
    return parse_pair(pair, lambda key, text: OPTIONS[key].parse(text), keys=allowed, flag=flag)


def parse_options(pairs: Collection[str], flag: str = "--planner") -> dict[str, Any]:
    """``l3p export --planner`` values: any option (a bundle's defaults), each parsed by its row."""
    return dict(parse_option(pair, flag=flag) for pair in pairs)


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """A planner variant, ``MODE[@key=value...]`` (e.g. ``l3p@search=hard``), -> (mode, overrides),
    checked as a request's (`PlannerConfig.for_episode`) over the table's defaults."""
    mode, *pairs = text.strip().split("@")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r} in {text!r}"
                         + did_you_mean(mode, MODES))
    try:
        overrides = dict(parse_option(pair, EPISODE_OPTIONS) for pair in pairs)
        PlannerConfig().for_episode(mode=mode, **overrides)
    except ValueError as exc:
        raise ValueError(f"{exc} in {text!r}") from None
    return mode, overrides


VARIANT_HELP = (f"planner mode ({', '.join(MODES)}) with optional per-episode overrides, "
                f"MODE[@KEY=VALUE...], KEY in {', '.join(EPISODE_OPTIONS)}; e.g. l3p@search=hard")


def variant_arg(text: str) -> str:
    """An argparse ``type=`` for a planner variant: the text, checked (the message says why not)."""
    import argparse

    try:
        parse_variant(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text.strip()

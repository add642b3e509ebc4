"""The planner's names, declared once: modes, searches, and every planner option with its type
and range. `PlannerConfig` validates with these specs; the proto mapping, the server, the client,
the runner's ``MODE[@key=value...]`` variants and the command-line help all read them here.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from l3p.core.commandline import did_you_mean

DISTRIBUTION = "l3p-service"  # the name to pip install, with its extras

MODES = ("l3p", "naive", "policy")
SEARCHES = ("soft", "hard", "expectation")

GOAL = -1  # subgoal index of the final goal

# Below this the soft search's exponents -d / temperature overflow (at 5e-324, 1 / temperature
# is inf and 0 * inf is NaN: pairs turned unreachable). The soft search is already min-plus
# (exact) well above it; search="hard" is its limit.
MIN_TEMPERATURE = 1e-6


def install_hint(extras: str) -> str:
    """The pip command that adds ``extras`` (``"serve"``, ``"ros2,sim"``) to this install, in the form
    for how it was made (pip records it: a checkout, a wheel file, an index), with the checkout's
    form beside it: no index serves this distribution, so ``l3p-service[...]`` alone is no answer."""
    checkout = f"pip install -e '.[{extras}]'"
    source, editable = _installed_from()
    if source is None:
        return (f"{checkout} in a checkout, or pip install 'WHEEL.whl[{extras}]' with the wheel "
                f"(pip install '{DISTRIBUTION}[{extras}]' from an index that serves it)")
    if source.endswith(".whl"):
        return f"pip install '{source}[{extras}]' (the wheel this install came from; in a checkout: {checkout})"
    if not editable:
        checkout = f"pip install '.[{extras}]'"
    return f"{checkout} in the checkout {source} (with a wheel: pip install 'WHEEL.whl[{extras}]')"


def _installed_from() -> tuple[str | None, bool]:
    """(the local directory or wheel file this distribution was installed from, editable), or
    (None, False) for an install from an index or without pip's record (PEP 610)."""
    import json
    import urllib.parse
    from importlib import metadata

    # Every record of the name: a checkout's own egg-info (no record) may come first on sys.path.
    texts = (dist.read_text("direct_url.json") for dist in metadata.distributions(name=DISTRIBUTION))
    try:
        record = json.loads(next((text for text in texts if text), "{}"))
    except ValueError:
        return None, False
    url = record.get("url", "")
    if not url.startswith("file://"):
        return None, False
    return urllib.parse.unquote(url.removeprefix("file://")), bool(record.get("dir_info", {}).get("editable"))


def is_real(x: object) -> bool:
    # The exact types first: the ABC checks cost microseconds on every episode start.
    return type(x) is float or type(x) is int or (isinstance(x, numbers.Real) and not isinstance(x, bool))


def is_int(x: object) -> bool:
    return type(x) is int or (isinstance(x, numbers.Integral) and not isinstance(x, bool))


def is_bool(x: object) -> bool:
    # numpy's bool (np.bool_, named "bool" in numpy 2) without a numpy import here.
    return type(x) is bool or (type(x).__module__ == "numpy" and type(x).__name__ in ("bool_", "bool"))


def _parse_bool(text: str) -> bool:
    try:
        return {"true": True, "false": False}[text.lower()]
    except KeyError:
        raise ValueError(f"expected true or false, got {text!r}") from None


class OptionValueError(ValueError):
    """A planner option's value outside its range. ``option`` and ``expected`` say what without the
    value: a bundle's refusal never echoes what its manifest holds."""

    def __init__(self, option: str, expected: str, value: Any, hint: str = ""):
        super().__init__(f"{option} must be {expected}, got {value!r}{hint}")
        self.option, self.expected = option, expected


@dataclass(frozen=True)
class Option:
    """One planner option: its value kind, allowed range, help, and whether a client may set it
    per episode (`EpisodeOptions` in the proto) or only the bundle (`l3p export --planner`)."""

    name: str
    kind: str  # "choice", "number", "int" or "bool"
    help: str
    choices: tuple[str, ...] = ()
    low: float = 0.0  # number: > low (or >= low with low_inclusive); int: >= low
    low_inclusive: bool = False
    high: int | None = None  # int: <= high
    per_episode: bool = True
    modes: tuple[str, ...] = MODES  # the planner modes it changes anything in

    def check_mode(self, value: Any, mode: str) -> None:
        """Raise ValueError when turning this option on asks a mode it does nothing in."""
        if mode not in self.modes and value not in (None, False):
            raise ValueError(f"{self.name} applies to mode {' or '.join(self.modes)} only, not "
                             f"{mode}: leave it unset")

    def check(self, value: Any) -> None:
        """Raise ValueError naming the option, its allowed range and the value."""
        if self.kind == "choice":
            ok = value in self.choices
        elif self.kind == "number":
            ok = is_real(value) and math.isfinite(value) and (value >= self.low if self.low_inclusive
                                                                 else value > self.low)
        elif self.kind == "int":
            ok = is_int(value) and value >= self.low and (self.high is None or value <= self.high)
        else:
            ok = is_bool(value)
        if not ok:
            hint = did_you_mean(value, self.choices) if self.kind == "choice" and isinstance(value, str) else ""
            raise OptionValueError(self.name, self.expected, value, hint)

    @property
    def expected(self) -> str:
        if self.kind == "choice":
            return f"one of {self.choices}"
        if self.kind == "number":
            return f"a finite number {'>=' if self.low_inclusive else '>'} {self.low:g}"
        if self.kind == "int":
            return (f"an integer in [{self.low:g}, {self.high}]" if self.high is not None
                    else f"an integer >= {self.low:g}")
        return "a bool"

    def parse(self, text: str) -> Any:
        """The value written as text (``--planner KEY=VALUE``, ``MODE@KEY=VALUE``), checked."""
        text = text.strip()
        if self.kind == "number":
            value: Any = float(text)
        elif self.kind == "int":
            value = int(text)
        elif self.kind == "bool":
            value = _parse_bool(text)
        else:
            value = text
        self.check(value)
        return value


# In PlannerConfig's field order (core/config.py builds its defaults beside these).
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("mode", "choice", "l3p: Algorithm 1 (counter + exclusion); naive: re-plan every step; "
           "policy: pi(obs, goal), no graph", choices=MODES),
    Option("d_max", "number", "edges and local distances longer than this are cut (steps)"),
    Option("temperature", "number", "beta of the soft search and of subgoal sampling "
           f"(>= {MIN_TEMPERATURE:g}; search=hard is the exact limit)"),
    Option("search", "choice", "soft: guarded soft update; hard: exact Floyd-Warshall; "
           "expectation: the paper's update as written", choices=SEARCHES),
    Option("search_iterations", "int", "iterations of the soft search", low=1, high=1000, per_episode=False),
    Option("local_horizon", "number", "the goal within this many steps (by D): go straight for it",
           low_inclusive=True),
    Option("counter_extra", "int", "added to the counter at each re-plan", per_episode=False),
    Option("sample_subgoal", "bool", "sample the subgoal from softmax(-d / temperature) instead of argmin"),
    Option("adaptive_cut", "bool", "a node keeps its nearest incoming edge even beyond d_max", per_episode=False),
    Option("prune_failed", "bool", "l3p: prune subgoals not reached within their counter (an extension)",
           modes=("l3p",)),
    Option("require_progress", "bool", "l3p: a landmark is a candidate only if nearer the goal (by the graph) "
           "than the last one picked (an extension)", modes=("l3p",)),
    Option("local_cut", "number", "distances from the state (D) longer than local_cut x d_max are cut; graph "
           "edges at d_max (an extension; 1: Algorithm 1)", modes=("l3p", "naive")),
    Option("follow_edges", "bool", "l3p: landmarks the graph connects from the landmark the state is at are "
           "candidates whatever their distance from the state (an extension)", modes=("l3p",)),
    Option("prune_loops", "bool", "l3p: prune a landmark picked again within a few re-plans without the way to "
           "the goal getting shorter (an extension)", modes=("l3p",)),
    Option("next_hop", "bool", "l3p: re-plan every step; the subgoal is the next node of the graph's route from "
           "the landmark nearest the state by D (no counter; an extension)", modes=("l3p",)),
    Option("action_scale", "number", "the actor's action times this, then clipped to the bundle's bounds: below 1 "
           "a gentler gait (a legged robot that tips over at the learned torque); 1: as learned"),
)}
EPISODE_OPTIONS = tuple(name for name, o in OPTIONS.items() if o.per_episode and name != "mode")
"""The overrides a client may send with an episode beside its mode (and seed)."""


def parse_option(pair: str, allowed: tuple[str, ...] = tuple(OPTIONS)) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (key, checked value); ValueError names the allowed keys or the range."""
    key, sep, text = pair.partition("=")
    key = key.strip()
    if not sep or key not in allowed:
        raise ValueError(f"expected KEY=VALUE with KEY in {', '.join(allowed)}; got {pair!r}"
                         + did_you_mean(key, allowed))
    try:
        return key, OPTIONS[key].parse(text)
    except ValueError as exc:
        raise ValueError(f"bad value for {key}: {text!r} ({exc})") from None


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """A planner variant, ``MODE[@key=value...]`` (e.g. ``l3p@search=hard``), -> (mode, overrides)."""
    mode, *pairs = text.strip().split("@")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r} in {text!r}"
                         + did_you_mean(mode, MODES))
    overrides = {}
    for pair in pairs:
        try:
            key, value = parse_option(pair, EPISODE_OPTIONS)
        except ValueError as exc:
            raise ValueError(f"{exc} in {text!r}") from None
        try:
            OPTIONS[key].check_mode(value, mode)
        except ValueError as exc:
            raise ValueError(f"{exc} in {text!r}") from None
        overrides[key] = value
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

HELD_OUT_MEASURES: dict[str, str] = {
    "held_out_distance_error": "D's mean error against the recorded steps from a state to a later achieved goal "
                               "(steps; a recorded path need not be the shortest)",
    "held_out_distance_rank": "rank correlation of D with those recorded steps (1: D orders the goals as the "
                              "recording reached them)",
    "held_out_action_error": "the actor's mean error on the recorded actions, as a fraction of the largest action bound",
    "graph_joined": "the landmarks in the largest strongly connected part of the graph the training episodes support",
}
"""What a run trained from a recording alone (no env) measures on its held-out split in place of
episodes (training/held_out.py), and what each is, as its card says it."""

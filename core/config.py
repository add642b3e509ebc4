"""The planner's settings: one frozen dataclass, validated against the option specs of
`l3p.core.names` (the bundle's defaults, a training run's planner, an episode's overrides)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from l3p.core.names import MIN_TEMPERATURE, OPTIONS, OptionValueError

# prune_failed thresholds, in steps of the distance network (see PlannerConfig).
PRUNE_AT_STEPS = 1.0
PRUNE_MIN_STEPS = 3.0
PRUNE_PROGRESS = 0.5
# prune_loops: a landmark picked again within this many re-plans, the way left no shorter, is a loop.
LOOP_REPLANS = 6


def check_temperature(temperature: float) -> None:
    OPTIONS["temperature"].check(temperature)
    if temperature < MIN_TEMPERATURE:
        raise OptionValueError("temperature", f">= {MIN_TEMPERATURE:g} (smaller values underflow the soft "
                               "search; search=hard is its exact limit)", temperature)


@dataclass(frozen=True)
class PlannerConfig:
    mode: str = "l3p"
    d_max: float = 15.0  # edges / local distances longer than this are cut
    temperature: float = 1.1  # beta of the soft search and of subgoal sampling
    search: str = "soft"
    search_iterations: int = 20
    local_horizon: float = 10.0  # goal within this many steps (by D): go straight for it
    counter_extra: int = 1  # added to the counter at each re-plan (reference code)
    sample_subgoal: bool = False  # sample from softmax(-d/temperature) instead of argmin
    adaptive_cut: bool = True  # a node keeps its nearest incoming edge even beyond d_max
    # Extension beyond Algorithm 1 (mode l3p). Algorithm 1 forgets a failed subgoal after one
    # re-plan: a learned distance that is too short (an edge through a wall) makes the agent
    # alternate between that subgoal and another, and two landmarks at one spot make it
    # alternate between them. With prune_failed: (a) a landmark the state is already at
    # (D < PRUNE_AT_STEPS) is not a candidate; (b) a landmark subgoal whose counter ran out
    # with D(state, subgoal) still > max(PRUNE_MIN_STEPS, PRUNE_PROGRESS * D at its pick) is
    # pruned for the rest of the episode: its incoming edges are removed, d_cg is solved
    # again (one search), and it is not picked again unless (c) pruning leaves no landmark with
    # a route while the goal is beyond d_max: then every prune is forgotten (the episode's graph
    # as it started), rather than pursuing the far goal directly (into a wall, as often as not).
    prune_failed: bool = False
    # Extension beyond Algorithm 1 (mode l3p). Excluding only the subgoal being replaced lets a
    # distance estimate that is too long towards the goal (it stays beyond d_max from every
    # landmark near it, so the goal stays cut) alternate the agent between two landmarks that
    # each route through the other. With require_progress a landmark is a candidate only if its
    # graph distance to the goal (d_cg) is below that of the last landmark the episode picked;
    # when none is, the goal is pursued directly. The picks' d_cg then falls strictly, so an
    # episode visits at most N landmarks before going for the goal.
    require_progress: bool = False
    # Extension beyond Algorithm 1. The distance from the state, D, is trusted over short ranges
    # only (a far estimate cuts through walls), while the graph's edges may be long where the data
    # supports them (a bundle's data-supported edges, `LandmarkGraph`): landmarks, and the goal
    # while a landmark is usable, whose D from the state exceeds local_cut * d_max are cut.
    local_cut: float = 1.0
    # Extension beyond Algorithm 1 (mode l3p). A short D from the state to a landmark across a wall
    # makes a hop the data never made, and with a local cut shorter than the graph's the route's next
    # hop from a reached landmark is cut. With follow_edges every hop is an edge of the episode's
    # graph: the state counts as at its anchors (the landmark nearest it by D, and the subgoal being
    # replaced when it was reached), and the candidates are the nearest landmark and the landmarks
    # and goal the anchors have edges to, whatever their D from the state; the local cut then applies
    # to the goal's local_horizon shortcut alone.
    follow_edges: bool = False
    # Extension beyond Algorithm 1 (mode l3p). A route the agent cannot follow (a hop it cannot make
    # that the distances call short) brings it back to where it was: a landmark picked again within
    # LOOP_REPLANS re-plans while the estimate of the rest of the way (d_sc + d_cg) has not fallen by
    # PRUNE_MIN_STEPS since its last pick is pruned for the episode as prune_failed prunes (incoming
    # edges removed, d_cg solved again; a landmark within PRUNE_AT_STEPS is not a candidate).
    prune_loops: bool = False
    # Extension beyond Algorithm 1 (mode l3p). A committed subgoal is reached and then waited at
    # (the counter runs on), or missed and replaced late. With next_hop every step re-plans: the
    # state counts as at the landmark nearest it by D, and the subgoal is that landmark's next node
    # on the episode graph's shortest route to the goal (argmin over its edges j of w + d_cg(j)), so
    # the agent always pursues the hop ahead of where it is. No counter and no exclusion: the pick
    # options (sample_subgoal, follow_edges, prune_failed, prune_loops, require_progress) do nothing.
    next_hop: bool = False
    # Every mode: the action sent is the actor's times action_scale (the server then clips it to the
    # bundle's bounds), as legged-robot controllers scale a policy's output. A learned gait can be
    # harsher than the robot's footing allows near obstacles; a smaller scale trades speed for it.
    action_scale: float = 1.0

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field and its allowed range."""
        for field in dataclasses.fields(self):
            OPTIONS[field.name].check(getattr(self, field.name))
        check_temperature(self.temperature)

    def replace(self, **overrides: object) -> "PlannerConfig":
        """A validated copy with `overrides` applied (unknown names raise TypeError)."""
        config = dataclasses.replace(self, **overrides)
        config.validate()
        return config

    @property
    def local_d_max(self) -> float:
        """The cut of distances from the state: local_cut * d_max."""
        return self.local_cut * self.d_max

    @property
    def counter_cap(self) -> int:
        """Upper bound of the re-plan counter: ceil(d_max)."""
        return math.ceil(self.d_max)

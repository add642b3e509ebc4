"""Time alignment of a bag's topics into steps (the rule: `l3p.datasets.mapping.Alignment`).

Vectorized over whole topics: each action is matched to the newest message of every other topic
stamped at or before it (``searchsorted``), so a bag of a million steps aligns in a few numpy calls.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from l3p.core.dataset import DatasetError

NO_OBSERVATION = "no observation within max_skew_s"
NO_GOAL = "no goal before it"
SUPERSEDED = "a later action on the same observation"
ONE_STEP = "in an episode of one step"  # counted only where there are some


@dataclass
class Stream:
    """One topic's messages: stamps (ns, non-decreasing) and values [messages, dim]."""

    what: str
    stamps: np.ndarray
    values: np.ndarray
    max_skew_ns: int | None = None  # None: a message holds until the next one (goals)


@dataclass
class Aligned:
    observations: np.ndarray
    actions: np.ndarray
    terminals: np.ndarray
    achieved_goals: np.ndarray | None
    desired_goals: np.ndarray | None
    action_index: np.ndarray  # the action message of each step (for error messages)
    dropped: dict[str, int] = field(default_factory=dict)


def check_monotonic(stream: Stream, where: str) -> None:
    back = np.flatnonzero(np.diff(stream.stamps) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise DatasetError(f"{where}: {stream.what}: stamps go back in time at message {i} "
                           f"({stream.stamps[i - 1]} ns, then {stream.stamps[i]} ns)")


def _latest(stream: Stream, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.searchsorted(stream.stamps, t, side="right") - 1
    ok = idx >= 0
    idx = np.maximum(idx, 0)
    if stream.max_skew_ns is not None and len(stream.stamps):
        ok &= (t - stream.stamps[idx]) <= stream.max_skew_ns
    return idx, ok


def goal_changes(desired: list[Stream]) -> np.ndarray:
    """The stamps of the goal messages that differ from the one before them on their topic."""
    ends = [s.stamps[1:][np.any(s.values[1:] != s.values[:-1], axis=1)] for s in desired]
    return np.sort(np.concatenate([np.zeros(0, np.int64), *ends]))


def align(action: Stream, observation: list[Stream], achieved: list[Stream], desired: list[Stream],
          max_gap_ns: int, where: str, ends: np.ndarray | None = None) -> Aligned:
    """Steps from the streams; raises `DatasetError` naming ``where`` where no step is left.
    ``ends``: the stamps of the episode ends (an end topic's messages), sorted; None: the goal changes."""
    for s in (action, *observation, *achieved, *desired):
        check_monotonic(s, where)
        if not len(s.stamps):
            raise DatasetError(f"{where}: {s.what} has no messages")
    t = action.stamps
    obs_idx, obs_ok = zip(*(_latest(s, t) for s in (*observation, *achieved)))
    have_obs = np.logical_and.reduce(obs_ok)
    goal = [_latest(s, t) for s in desired]
    have_goal = np.logical_and.reduce([ok for _, ok in goal]) if goal else np.ones(len(t), bool)
    valid = have_obs & have_goal
    dropped = {NO_OBSERVATION: int((~have_obs).sum()), NO_GOAL: int((have_obs & ~have_goal).sum())}
    v = np.flatnonzero(valid)
    first = obs_idx[0][v]
    keep = v[np.r_[first[1:] != first[:-1], True]] if len(v) else v
    dropped[SUPERSEDED] = int(len(v) - len(keep))
    if len(keep) == 0:
        raise DatasetError(f"{where}: {action.what}: no action has an observation within max_skew_s "
                           f"({len(t)} actions)")

    # A new episode where an action was dropped (not superseded), after a gap, or at an episode end.
    hard_dropped = np.cumsum(~valid)[keep]
    start = np.zeros(len(keep), bool)
    start[0] = True
    start[1:] |= hard_dropped[1:] != hard_dropped[:-1]
    start[1:] |= np.diff(t[keep]) > max_gap_ns
    # an end stamped at an action's own stamp counts before it, as a goal message does
    passed = np.searchsorted(goal_changes(desired) if ends is None else ends, t[keep], side="right")
    start[1:] |= passed[1:] != passed[:-1]
    # An episode of one step has no transition: left out, as the recorders' writer leaves it out.
    single = start & np.r_[start[1:], True]
    if single.any():
        dropped[ONE_STEP] = int(single.sum())
        keep, start = keep[~single], start[~single]
    if len(keep) == 0:
        raise DatasetError(f"{where}: {action.what}: every episode has one step (steps dropped around each, gaps "
                           f"over max_gap_s or episode ends one step apart)")

    def rows(streams: list[Stream], idx: tuple[np.ndarray, ...]) -> np.ndarray | None:
        if not streams:
            return None
        return np.concatenate([s.values[i[keep]] for s, i in zip(streams, idx)], axis=1)

    n_obs = len(observation)
    return Aligned(observations=rows(observation, obs_idx[:n_obs]), actions=action.values[keep],
                   terminals=np.r_[start[1:], True].astype(np.float32), achieved_goals=rows(achieved, obs_idx[n_obs:]),
                   desired_goals=rows(desired, tuple(i for i, _ in goal)), action_index=keep, dropped=dropped)


class LiveAligner:
    """The same rule, one message at a time, for a recorder on a live robot (`l3p ros2 record`).

    Messages arrive in receive order, so the newest message of a topic is the latest before an
    action. A step is held back until the next action on another observation (it may still be
    superseded); it is then emitted as ``on_step(values, starts_episode)``; ``flush()`` emits the
    held step at the end. The steps and their episode starts equal `align`'s on the same messages.
    ``split_on_goal``: a goal message that differs from the one before it on its topic ends an
    episode; else only ``end_episode()`` (an end topic's message, a service call) does, besides drops
    and pauses.
    """

    def __init__(self, n_observed: int, n_desired: int, max_skew_ns: int, max_gap_ns: int, on_step,
                 split_on_goal: bool = True) -> None:
        self.latest: list[tuple[int, int, np.ndarray] | None] = [None] * n_observed  # (seq, stamp, values)
        self.goals: list[np.ndarray | None] = [None] * n_desired
        self.seq = [0] * n_observed
        self.max_skew_ns, self.max_gap_ns = max_skew_ns, max_gap_ns
        self.on_step = on_step
        self.split_on_goal = split_on_goal
        self.pending: dict | None = None
        self.kept: dict | None = None  # the last step emitted
        # Breaks (dropped actions, episode ends) between the last emitted step and the pending one,
        # and after the pending one: a step that supersedes the pending one inherits both.
        self.breaks_before_pending = 0
        self.breaks_after_pending = 0
        self.dropped = {NO_OBSERVATION: 0, NO_GOAL: 0, SUPERSEDED: 0}

    def observed(self, k: int, stamp_ns: int, values: np.ndarray) -> None:
        """A message of observation (or achieved-goal) topic ``k``."""
        self.seq[k] += 1
        self.latest[k] = (self.seq[k], stamp_ns, values)

    def goal(self, k: int, values: np.ndarray) -> None:
        if self.split_on_goal and self.goals[k] is not None and not np.array_equal(self.goals[k], values):
            self.end_episode()
        self.goals[k] = values

    def end_episode(self) -> None:
        """The episode ends here (an end message, or a dropped action): the next step starts a new one."""
        if self.pending is None:
            self.breaks_before_pending += 1
        else:
            self.breaks_after_pending += 1

    def action(self, stamp_ns: int, values: np.ndarray) -> bool | None:
        """None if the action was dropped or superseded the held step; else whether the step it
        makes starts an episode (known now: a step superseding it would start one too)."""
        have_obs = all(m is not None and stamp_ns - m[1] <= self.max_skew_ns for m in self.latest)
        if not have_obs or any(g is None for g in self.goals):
            self.dropped[NO_OBSERVATION if not have_obs else NO_GOAL] += 1
            self.end_episode()
            return None
        step = {"stamp": stamp_ns, "obs_seq": self.latest[0][0], "action": values,
                "observed": [m[2] for m in self.latest], "goals": list(self.goals)}
        fresh = self.pending is None or self.pending["obs_seq"] != step["obs_seq"]
        if fresh:
            self._emit()
        else:
            self.dropped[SUPERSEDED] += 1
            self.breaks_before_pending += self.breaks_after_pending
        self.pending = step
        self.breaks_after_pending = 0
        return self._starts(step) if fresh else None

    def _starts(self, step: dict) -> bool:
        last = self.kept
        return last is None or self.breaks_before_pending > 0 or step["stamp"] - last["stamp"] > self.max_gap_ns

    def _emit(self) -> None:
        step = self.pending
        if step is None:
            return
        self.on_step(step, self._starts(step))
        self.kept, self.pending = step, None
        self.breaks_before_pending, self.breaks_after_pending = self.breaks_after_pending, 0

    def flush(self) -> None:
        self._emit()

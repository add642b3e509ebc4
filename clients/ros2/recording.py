"""What ``l3p ros2 record`` does with the messages it receives, apart from ROS: each is read through the
mapping (`l3p.datasets.messages`), held ``REORDER_NS`` and passed on in stamp order to the live
alignment (`l3p.datasets.align.LiveAligner`), whose steps go to the dataset writer
(`l3p.datasets.writer.EpisodeWriter`, ``.npz``), or, with a bag series (`l3p.datasets.bag_writer.BagSeries`,
MCAP), the messages themselves go to the bags, which rotate where a step starts an episode.

Bags rotate only there, and before the command that makes that step is written, so that each bag
imported on its own (`l3p dataset import rosbag2`, the same mapping) gives the steps and episodes the
``.npz`` output gives: the alignment decides whether a step starts an episode when its command
arrives (`LiveAligner.action`), and a command that supersedes it would start one too. A bag also
rotates where an episode reaches ``max_episode_steps`` (the ``.npz`` writer cuts it there; a bag
cuts it by ending).
"""
from __future__ import annotations

import heapq
import resource
from typing import Any

import numpy as np

from l3p.core.errors import L3PError
from l3p.datasets.align import NO_GOAL, NO_OBSERVATION, SUPERSEDED, LiveAligner
from l3p.datasets.bag_writer import BagSeries
from l3p.datasets.mapping import Mapping, Part
from l3p.datasets.messages import BadMessage, ends_episode, message_vector, part_fields
from l3p.datasets.writer import EpisodeWriter

# An executor serves ready subscriptions in its own order, not in the order messages arrived: each
# message waits this long, then all go to the aligner sorted by their stamps (rmw's, record.py).
REORDER_NS = 200_000_000
DEFAULT_TYPE = "std_msgs/msg/Float64MultiArray"
GOAL_TYPE = "geometry_msgs/msg/PointStamped"
END_SERVICE_TYPE = "std_msgs/msg/Empty"  # a service call's record in a bag


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def topics(mapping: Mapping) -> dict[str, tuple[str, list[tuple[str, int, Part | None]]]]:
    """topic -> (message type, [(role, index, part)]) for every topic the mapping reads."""
    out: dict[str, tuple[str, list[tuple[str, int, Part | None]]]] = {}
    observed = (*mapping.observation, *mapping.achieved_goal)
    uses: list[tuple[str, int, Part | None, str]] = [
        ("observed", k, p, p.type or DEFAULT_TYPE) for k, p in enumerate(observed)]
    uses += [("goal", k, p, p.type or GOAL_TYPE) for k, p in enumerate(mapping.desired_goal)]
    uses += [("action", 0, p, p.type or DEFAULT_TYPE) for p in mapping.action]
    episodes = mapping.episodes
    if episodes.split == "topic":
        uses.append(("end", 0, None, episodes.type))
    for role, k, part, kind in uses:
        topic = part.topic if part is not None else episodes.topic
        have = out.setdefault(topic, (kind, []))
        if have[0] != kind:
            raise L3PError(f"{mapping.where()}: topic {topic} is given two types, {have[0]} and {kind}")
        have[1].append((role, k, part))
    return out


def bag_series(mapping: Mapping, out: str) -> BagSeries:
    """The bags of a recording: its topics (a service's calls as a topic of the service's name), each
    beginning with the newest message of every topic a step pairs with."""
    kinds = {topic: kind for topic, (kind, _) in topics(mapping).items()}
    if mapping.episodes.split == "service":
        kinds[mapping.episodes.service] = END_SERVICE_TYPE
    held = {p.topic for p in (*mapping.observation, *mapping.achieved_goal, *mapping.desired_goal)}
    return BagSeries(out, kinds, held)


class Recording:
    """The recorder's state, apart from ROS: messages in, steps out to ``writer`` (an `EpisodeWriter`)
    or messages out to ``writer`` (a `BagSeries`, which then rotates every ``rotate_steps`` steps)."""

    def __init__(self, mapping: Mapping, writer: EpisodeWriter | BagSeries, *, rotate_steps: int = 20_000,
                 max_episode_steps: int = 10_000) -> None:
        self.mapping = mapping
        self.writer = writer
        self.bags = writer if isinstance(writer, BagSeries) else None
        self.rotate_steps, self.max_episode_steps = rotate_steps, max_episode_steps
        self.observed = [*mapping.observation, *mapping.achieved_goal]
        self.n_obs = len(mapping.observation)
        a = mapping.alignment
        self.aligner = LiveAligner(len(self.observed), len(mapping.desired_goal), int(a.max_skew_s * 1e9),
                                   int(a.max_gap_s * 1e9), self._step, split_on_goal=mapping.episodes.split == "goal")
        self.bad: dict[str, int] = {}
        self.last_bad = ""
        self.widths: dict[tuple[str, int], int] = {}
        self.messages = 0
        self.steps = 0
        self.file_steps = 0  # bags: steps in the open bag
        self.episode_steps = 0  # bags: steps of the running episode
        self.counts = {"episodes": 0, "steps": 0, "short_episodes_left_out": 0, "episodes_cut": 0}  # bags
        self.released_ns = 0
        self.rss: list[tuple[int, float]] = []
        self.waiting: list[tuple[int, int, str, list, list, bytes | None]] = []  # a heap by receive time

    def topics(self) -> dict[str, tuple[str, list[tuple[str, int, Part | None]]]]:
        return topics(self.mapping)

    def message(self, topic: str, kind: str, uses: list[tuple[str, int, Part | None]], msg: Any, stamp_ns: int,
                now_ns: int | None = None, raw: bytes | None = None) -> None:
        """One message (``raw``: its CDR bytes, for a bag), received at ``stamp_ns``; the aligner gets
        the messages received before ``now_ns - REORDER_NS`` (default: this one's stamp), in the
        order they were received. A message the mapping cannot read is counted and left out (of a
        bag too: its import would refuse it)."""
        self.messages += 1
        try:
            vectors: list[Any] = []
            for i, (role, k, part) in enumerate(uses):
                if part is None:  # an end topic's message
                    vectors.append(ends_episode(msg))
                    continue
                vec = message_vector(msg, part, part_fields(part, kind))
                if not np.all(np.isfinite(vec)):
                    raise BadMessage(f"has NaN or Inf at index {int(np.flatnonzero(~np.isfinite(vec))[0])}")
                width = self.widths.setdefault((topic, i), len(vec))
                if len(vec) != width:
                    raise BadMessage(f"has {len(vec)} values, the first message had {width}")
                vectors.append(vec)
        except BadMessage as err:
            self.bad[topic] = self.bad.get(topic, 0) + 1
            self.last_bad = f"topic {topic}: message {self.messages} {err}"
            return
        self._wait(stamp_ns, topic, uses, vectors, raw, now_ns)

    def end_episode(self, stamp_ns: int, raw: bytes | None = None, now_ns: int | None = None) -> None:
        """A call of the end-episode service at ``stamp_ns`` (``raw``: its record in a bag)."""
        self._wait(stamp_ns, self.mapping.episodes.service, [("end", 0, None)], [True], raw, now_ns)

    def _wait(self, stamp_ns: int, topic: str, uses: list, vectors: list, raw: bytes | None,
              now_ns: int | None) -> None:
        heapq.heappush(self.waiting, (stamp_ns, self.messages, topic, uses, vectors, raw))
        self.release(stamp_ns if now_ns is None else now_ns)

    def release(self, now_ns: int | None) -> None:
        """Messages received before ``now_ns - REORDER_NS`` to the aligner, oldest first (all: None).
        One received later than that (the process held up) is stamped when it is released, so that
        stamps never go back (a bag's import refuses that)."""
        while self.waiting and (now_ns is None or self.waiting[0][0] < now_ns - REORDER_NS):
            stamp_ns, _, topic, uses, vectors, raw = heapq.heappop(self.waiting)
            stamp_ns = self.released_ns = max(stamp_ns, self.released_ns)
            starts = None
            for (role, k, _), vec in zip(uses, vectors):
                if role == "observed":
                    self.aligner.observed(k, stamp_ns, vec)
                elif role == "goal":
                    self.aligner.goal(k, vec)
                elif role == "end":
                    if vec:
                        self.aligner.end_episode()
                else:
                    starts = self.aligner.action(stamp_ns, vec)
            if self.bags is not None:
                full = self.file_steps >= self.rotate_steps
                if starts is not None and self.file_steps and (
                        (starts and full) or self.episode_steps >= self.max_episode_steps):
                    self.bags.rotate()
                    self.file_steps = 0
                if raw is not None:
                    self.bags.write(topic, stamp_ns, raw)

    def _step(self, step: dict[str, Any], starts: bool) -> None:
        self.steps += 1
        if self.steps % 10_000 == 0:
            self.rss.append((self.steps, rss_mb()))
        if self.bags is not None:
            # counted as the .npz writer counts: a cut at max_episode_steps, one-step episodes left out
            if starts or self.episode_steps >= self.max_episode_steps:
                self._episode_ended()
            self.episode_steps += 1
            self.counts["episodes_cut"] += int(self.episode_steps == self.max_episode_steps)
            self.file_steps += 1
            return
        if starts:
            self.writer.end_episode()
        obs = np.concatenate(step["observed"][:self.n_obs]).astype(np.float32)
        if self.mapping.achieved_goal_indices:
            achieved = obs[list(self.mapping.achieved_goal_indices)]
        else:
            achieved = np.concatenate(step["observed"][self.n_obs:]).astype(np.float32)
        row = {"observations": obs, "actions": step["action"].astype(np.float32), "achieved_goals": achieved}
        if step["goals"]:
            row["desired_goals"] = np.concatenate(step["goals"]).astype(np.float32)
        self.writer.add(**row)

    def _episode_ended(self) -> None:
        if self.episode_steps >= 2:
            self.counts["episodes"] += 1
            self.counts["steps"] += self.episode_steps
        self.counts["short_episodes_left_out"] += int(self.episode_steps == 1)
        self.episode_steps = 0

    def progress(self) -> str:
        """The running count, as a line: steps, episodes, dropped (and why), superseded."""
        episodes = self.counts["episodes"] if self.bags is not None else self.writer.counts["episodes"]
        d = self.aligner.dropped
        return (f"{self.steps} steps, {episodes} episodes finished, dropped {d[NO_OBSERVATION]} (no observation "
                f"within max_skew_s) + {d[NO_GOAL]} (no goal yet), superseded {d[SUPERSEDED]}, bad messages "
                f"{sum(self.bad.values())}")

    def close(self) -> dict[str, Any]:
        self.release(None)
        self.aligner.flush()
        if self.bags is not None:
            self._episode_ended()
            self.bags.close(keep=self.file_steps >= 2)  # one step: no transition
            counts = self.counts
        else:
            self.writer.close()
            counts = self.writer.counts
        return {**counts, "files": [str(f) for f in self.writer.files], "dropped": self.aligner.dropped,
                "bad_messages": self.bad, "last_bad_message": self.last_bad, "messages": self.messages,
                "rss_mb": {"samples": self.rss, "now": rss_mb(),
                           "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}}

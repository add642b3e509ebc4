"""The served graph from the data (training/edges.py) and the planner options it turns on
(`local_cut`, `follow_edges`): edges the data never passed along are not served, d_max follows
from the graph, and the route's next hop from a reached landmark is never cut locally."""
from __future__ import annotations

import numpy as np
import pytest

from l3p.core import EpisodePlanner, LandmarkGraph, PlannerConfig
from l3p.core.bundle_format import BundleError, supported_edges
from l3p.core.search import largest_component
from l3p.training.edges import (D_MAX_MARGIN, LOCAL_CUT, SUPPORT_RATIO, actor_reach, connecting_cut, data_graph,
                                near_labels, passages)


def line_value_fn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Steps between points of a plane at 1 unit per step, walls unseen: what a learned V gets
    wrong across a wall."""
    return np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64), axis=1)


def u_corridor() -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Landmarks along a U (down x=0, across y=0, up x=4): the two arms' tops are 4 apart in the
    plane but 12 apart along the U. Recorded episodes walk the U both ways, 1 unit per step."""
    landmarks = np.array([[0, 4], [0, 2], [0, 0], [2, 0], [4, 0], [4, 2], [4, 4]], np.float64)
    path = np.concatenate([np.linspace(landmarks[k], landmarks[k + 1], 8, endpoint=False)
                           for k in range(len(landmarks) - 1)] + [landmarks[-1:]])
    goals = np.concatenate([path, path[::-1]])
    return landmarks, goals, [(0, len(path) - 1), (len(path), 2 * len(path) - 1)]


def test_an_edge_is_supported_only_where_an_episode_passed_along_it_within_its_length() -> None:
    landmarks, goals, bounds = u_corridor()
    graph = data_graph(landmarks, goals, bounds, line_value_fn)
    assert graph.radius == pytest.approx(1.0)  # half the 2-unit spacing
    top_left, top_right = 0, 6
    # V says 4 steps across the gap; the episodes took 24 steps (12 units at 8 per 2): not supported.
    assert not graph.supported[top_left, top_right] and not graph.supported[top_right, top_left]
    for i in range(6):  # neighbours along the U, both ways
        assert graph.supported[i, i + 1] and graph.supported[i + 1, i]
    assert not graph.supported.diagonal().any()
    # Passages count the steps between leaving near one landmark and arriving near the other: with
    # 8 steps between neighbours and 4 near each (radius 1 at 1/4 unit a step), 1 step apart.
    steps = passages(near_labels(goals, landmarks, graph.radius), bounds, len(landmarks))
    assert steps[0, 1] == steps[1, 0] == 1 and steps[0, 2] == 9 and steps[0, 6] == steps[6, 0] == 41
    assert steps[0, 6] > SUPPORT_RATIO * 4


def test_centred_landmarks_move_off_the_rim_of_the_data_into_its_middle() -> None:
    """A corridor 10 long and 2 wide, recorded densely; landmarks picked on its walls (as farthest-point
    picks lie) end down its middle, spread along it as before, each a recorded goal."""
    from l3p.training.export import centred_landmarks

    rng = np.random.default_rng(0)
    goals = np.stack([rng.uniform(0, 10, 20000), rng.uniform(-1, 1, 20000)], axis=1)
    picks = [int(np.argmin(((goals - [x, y]) ** 2).sum(1))) for x, y in
             [(0.5, 1), (2.5, -1), (4.5, 1), (6.5, -1), (8.5, 1), (9.5, -1)]]
    centred = centred_landmarks(goals[picks], goals)
    assert centred.dtype == np.float32 and centred.shape == (6, 2)
    assert np.abs(goals[picks][:, 1]).min() > 0.95  # on the walls before
    assert np.abs(centred[:, 1]).max() < 0.1  # in the middle after
    assert np.all(np.diff(np.sort(centred[:, 0])) > 1.2)  # still spread along the corridor
    for landmark in centred:  # each a recorded goal
        assert np.isclose(goals, landmark, atol=1e-6).all(axis=1).any()
    np.testing.assert_array_equal(centred_landmarks(goals[picks], goals), centred)  # deterministic


def test_d_max_is_the_margin_over_the_shortest_cut_that_joins_the_landmarks() -> None:
    landmarks, goals, bounds = u_corridor()
    graph = data_graph(landmarks, goals, bounds, line_value_fn)
    assert graph.d_connect == pytest.approx(2.0)  # the U's neighbours are 2 apart
    assert graph.d_max == pytest.approx(D_MAX_MARGIN * 2.0)
    assert graph.planner() == {"d_max": graph.d_max, "local_cut": LOCAL_CUT, "follow_edges": True,
                               "prune_loops": True}
    pairs = graph.manifest_edges()["supported"]
    assert sorted(map(tuple, pairs)) == sorted(zip(*np.nonzero(graph.supported)))
    np.testing.assert_array_equal(supported_edges({"n_landmarks": 7, "edges": graph.manifest_edges()}),
                                  graph.supported)


def test_d_max_stops_at_the_actors_reach_but_never_below_the_cut_that_joins_the_landmarks() -> None:
    """An actor that learned on goals at most k recorded steps ahead is handed no farther subgoals
    than V reads across k recorded steps (the median), unless the graph needs longer hops to join."""
    landmarks, goals, bounds = u_corridor()  # 1/4 unit a step, neighbours 2 apart: d_connect 2, margin 3
    # 10 steps along a straight stretch: 2.5 units; across the U's corners less.
    reach = actor_reach(goals, bounds, line_value_fn, 10)
    assert 2.0 < reach <= 2.5
    graph = data_graph(landmarks, goals, bounds, line_value_fn, reach_steps=10)
    assert graph.reach == pytest.approx(reach) and graph.d_max == pytest.approx(round(reach, 2))
    assert graph.provenance()["reach"] == round(reach, 2) and graph.provenance()["reach_steps"] == 10
    assert graph.d_connect == pytest.approx(2.0) and graph.supported.sum() == 12  # the edges do not change
    near = data_graph(landmarks, goals, bounds, line_value_fn, reach_steps=4)  # 1 unit: below the joining cut
    assert near.reach < near.d_connect and near.d_max == pytest.approx(2.0)
    far = data_graph(landmarks, goals, bounds, line_value_fn, reach_steps=40)  # beyond the margin: the margin
    assert far.reach > D_MAX_MARGIN * 2.0 and far.d_max == pytest.approx(D_MAX_MARGIN * 2.0)
    assert "reach" not in data_graph(landmarks, goals, bounds, line_value_fn).provenance()
    with pytest.raises(ValueError, match="no recorded episode is longer than 100 steps"):
        actor_reach(goals, bounds, line_value_fn, 100)


def test_the_connecting_cut_and_components() -> None:
    chain = np.full((4, 4), np.inf)
    for i, length in enumerate((1.0, 5.0, 2.0)):
        chain[i, i + 1] = chain[i + 1, i] = length
    supported = np.isfinite(chain)
    assert largest_component(supported).tolist() == [True] * 4
    assert largest_component(supported & (chain <= 2)).tolist() == [True, True, False, False]  # the first of two
    assert connecting_cut(chain, supported) == 5.0
    one_way = supported & np.triu(np.ones((4, 4), bool))
    assert largest_component(one_way).sum() == 1  # a path one way only joins no two landmarks
    assert largest_component(np.zeros((0, 0), bool)).size == 0
    with pytest.raises(ValueError, match="no supported edge"):
        connecting_cut(chain, np.zeros((4, 4), bool))


@pytest.mark.parametrize("edges", [{"supported": [[0, 0]]}, {"supported": [[0, 7]]}, {"supported": [[0]]},
                                   {"supported": "all"}, [], {"supported": [[True, 1]]}])
def test_a_bad_edge_list_is_refused_with_the_key(edges) -> None:
    with pytest.raises(BundleError, match=r"'edges.supported' must be a list of \[i, j\] landmark pairs"):
        supported_edges({"n_landmarks": 7, "edges": edges})


def test_no_edges_entry_keeps_every_pair() -> None:
    assert supported_edges({"n_landmarks": 3}) is None
    assert not supported_edges({"n_landmarks": 3, "edges": {"supported": []}}).any()


def test_unsupported_edges_are_not_in_the_graph() -> None:
    landmarks, goals, bounds = u_corridor()
    graph = data_graph(landmarks, goals, bounds, line_value_fn)
    config = PlannerConfig(d_max=5.0, search="hard", adaptive_cut=False)
    everything = LandmarkGraph(landmarks.astype(np.float32), line_value_fn)
    supported = LandmarkGraph(landmarks.astype(np.float32), line_value_fn, edges=graph.supported)
    goal = np.array([4.0, 5.5])  # 1.5 above the right arm's top, 5.5 from the left arm's top, 4.27 from the left's
    # Every pair: from the left arm's top across the gap, 4.27 (within d_max).
    assert everything.distances_to_goal(goal, line_value_fn, config)[0] == pytest.approx(np.hypot(4, 1.5), abs=1e-5)
    # The data's: along the U to the right arm's top (12), then the goal edge (1.5).
    assert supported.distances_to_goal(goal, line_value_fn, config)[0] == pytest.approx(12 + 1.5, abs=1e-5)
    w = supported.episode_weights(goal, line_value_fn, config)
    assert np.isinf(w[0, 6]) and np.isinf(w[6, 0]) and w[0, 1] == pytest.approx(2.0)
    with pytest.raises(ValueError, match=r"edges must have shape \[7, 7\]"):
        LandmarkGraph(landmarks.astype(np.float32), line_value_fn, edges=np.ones((6, 6), bool))


def test_the_goal_joins_the_graph_through_the_landmark_nearest_it() -> None:
    """A goal above the U's right arm: V calls the left arm's top 4.3 steps from it (across the
    gap), but the data reach it only along the U, so the goal keeps edges from its nearest landmark
    (the right arm's top) and that landmark's supported predecessors, and from no other."""
    landmarks, goals, bounds = u_corridor()
    graph = data_graph(landmarks, goals, bounds, line_value_fn)
    supported = LandmarkGraph(landmarks.astype(np.float32), line_value_fn, edges=graph.supported)
    goal = np.array([4.0, 5.5])
    assert np.flatnonzero(supported.goal_edges(goal[None])[0]).tolist() == [5, 6]
    config = PlannerConfig(d_max=5.0, search="hard")
    w = supported.episode_weights(goal, line_value_fn, config)
    assert np.isfinite(w[:7, 7]).nonzero()[0].tolist() == [5, 6]
    assert w[6, 7] == pytest.approx(1.5) and w[5, 7] == pytest.approx(3.5)
    # The batched start (a server's) gives the same goal column as one episode's.
    two = supported.distances_to_goals(np.array([goal, [0.0, 5.5]], np.float32), line_value_fn, config)
    np.testing.assert_allclose(two[0], supported.distances_to_goal(goal, line_value_fn, config))
    assert two[1][0] == pytest.approx(1.5) and two[1][6] == pytest.approx(12 + 1.5)
    # Only landmarks the supported edges join can take the goal: a landmark off the U, nearest the
    # goal but never passed from or to, is skipped for the U's nearest.
    stray = np.vstack([landmarks, [[4.0, 5.4]]]).astype(np.float32)
    edges = np.zeros((8, 8), bool)
    edges[:7, :7] = graph.supported
    assert np.flatnonzero(LandmarkGraph(stray, line_value_fn, edges=edges).goal_edges(goal[None])[0]).tolist() == [5, 6]
    # Without data edges every landmark keeps its edge to the goal (cut by d_max alone).
    assert LandmarkGraph(landmarks.astype(np.float32), line_value_fn).goal_edges(goal[None]) is None


def line_world(local_d: float):
    """A 1-d world: the state and goals are positions; D is exact up to ``local_d`` steps and
    inflated beyond (what a critic trained on short passages does far from them)."""
    def distance_fn(obs: np.ndarray, goals: np.ndarray):
        d = np.abs(goals[:, 0] - obs[:, 0]).astype(np.float64)
        d = np.where(d > local_d, 3 * d, d)
        return d, np.sign(goals - obs).astype(np.float32)

    def policy_fn(obs: np.ndarray, goals: np.ndarray) -> np.ndarray:
        return np.sign(goals - obs).astype(np.float32)

    return distance_fn, policy_fn


def run_line(config: PlannerConfig, goal: float = 40.0, steps: int = 120,
             wall: float | None = None) -> tuple[list[int], float]:
    """Landmarks at 0, 10, 20, 30; the agent starts at 0 and moves 1 a step towards its subgoal,
    never past ``wall`` (which neither D nor V know of)."""
    landmarks = np.array([[0.0], [10.0], [20.0], [30.0]], np.float32)
    value_fn = lambda a, b: np.abs(a[:, 0] - b[:, 0]).astype(np.float64)  # noqa: E731
    distance_fn, policy_fn = line_world(local_d=6.0)
    planner = EpisodePlanner(LandmarkGraph(landmarks, value_fn), np.array([goal], np.float32), value_fn, config)
    x, picks = 0.0, []
    for _ in range(steps):
        result = planner.step(np.array([x], np.float32), distance_fn, policy_fn)
        if result.replanned:
            picks.append(result.subgoal_index)
        x += float(result.action[0])
        if wall is not None:
            x = min(x, wall)
    return picks, x


BASE = PlannerConfig(d_max=12.0, local_cut=0.5, search="hard", local_horizon=3.0)


def test_follow_edges_takes_the_routes_next_hop_that_the_local_cut_would_drop() -> None:
    # The goal 4 past the last landmark. Without: from a landmark the next hop (10 away, D inflated
    # to 30) is cut locally; nothing is left but the goal, pursued directly from wherever the agent is.
    picks, _ = run_line(BASE, goal=34.0)
    assert picks[:4] == [0, -1, 1, -1]
    # With: the state is at a landmark (its anchor), whose graph edge to the next is kept: the route
    # goes on hop by hop, and the last landmark's edge to the goal ends it.
    picks, x = run_line(BASE.replace(follow_edges=True), goal=34.0)
    assert picks[:5] == [0, 1, 2, 3, -1] and set(picks[4:]) == {-1} and x == pytest.approx(34.0)


def test_follow_edges_hops_only_along_the_graphs_edges() -> None:
    # The goal 10 past the last landmark, beyond the local cut: the route goes on from each landmark
    # reached to the next, and from the last by its edge to the goal (an anchor's edge: not cut locally).
    picks, x = run_line(BASE.replace(follow_edges=True), goal=40.0)
    assert picks[:5] == [0, 1, 2, 3, -1] and x == pytest.approx(40.0)


def test_prune_loops_breaks_a_route_that_comes_back() -> None:
    def alternates(picks: list[int]) -> bool:
        return any(picks[i:i + 4] == [3, 2, 3, 2] for i in range(len(picks) - 3))

    # A wall at 25 that D and V do not know: the hop 2 -> 3 fails, the agent is back at 2, whose
    # route is 3 again, for ever.
    picks, x = run_line(BASE.replace(follow_edges=True), wall=25.0)
    assert alternates(picks) and x == 25.0
    # Picked again from 2 without the way left getting shorter, 3 is pruned and the goal pursued: the
    # alternation is broken.
    picks, x = run_line(BASE.replace(follow_edges=True, prune_loops=True), wall=25.0)
    assert not alternates(picks) and picks.count(2) < picks.count(-1)


def test_next_hop_pursues_the_routes_next_landmark_every_step_and_never_waits_at_one() -> None:
    # Algorithm 1 (with follow_edges) commits to the landmark the agent is at, then to each next one
    # for its counter: reached early, the agent waits there until the counter runs out.
    picks, x = run_line(BASE.replace(follow_edges=True), goal=40.0, steps=40)
    assert picks[:3] == [0, 1, 2] and x < 40.0
    # next_hop re-plans every step to the node after the landmark nearest the state: from 0 the hop is
    # 1 (at 10); past 5, 10 is nearer than 0, so the hop is 2 (at 20); ... and 3's edge goes to the
    # goal. The agent moves every step and is at the goal in 40 steps.
    landmarks = np.array([[0.0], [10.0], [20.0], [30.0]], np.float32)
    value_fn = lambda a, b: np.abs(a[:, 0] - b[:, 0]).astype(np.float64)  # noqa: E731
    distance_fn, policy_fn = line_world(local_d=6.0)
    config = BASE.replace(next_hop=True)
    planner = EpisodePlanner(LandmarkGraph(landmarks, value_fn), np.array([40.0], np.float32), value_fn, config)
    x, hops = 0.0, []
    for _ in range(40):
        result = planner.step(np.array([x], np.float32), distance_fn, policy_fn)
        assert result.replanned and result.counter == 0
        hops.append(result.subgoal_index)
        x += float(result.action[0])
    assert x == pytest.approx(40.0) and planner.replans == 40
    assert hops[:6] == [1] * 6 and hops[6:16] == [2] * 10 and hops[16:26] == [3] * 10 and set(hops[26:]) == {-1}
    # Without an edge ahead (the goal beyond d_max from every landmark, no route), the goal itself.
    lost = EpisodePlanner(LandmarkGraph(landmarks, value_fn), np.array([90.0], np.float32), value_fn,
                          config.replace(adaptive_cut=False))
    assert lost.step(np.array([0.0], np.float32), distance_fn, policy_fn).subgoal_index == -1
    from l3p.core.config import OPTIONS
    with pytest.raises(ValueError, match="next_hop applies to mode l3p only"):
        OPTIONS["next_hop"].check_mode(True, "naive")


def test_local_cut_one_is_algorithm_1() -> None:
    for config in (PlannerConfig(d_max=12.0, search="hard"), PlannerConfig(d_max=12.0, search="hard", local_cut=1.0)):
        assert run_line(config) == run_line(PlannerConfig(d_max=12.0, search="hard"))
    with pytest.raises(ValueError, match="local_cut must be a finite number > 0"):
        PlannerConfig(local_cut=0.0).validate()
    from l3p.core.config import OPTIONS
    for option in ("follow_edges", "prune_loops"):
        with pytest.raises(ValueError, match=f"{option} applies to mode l3p only"):
            OPTIONS[option].check_mode(True, "naive")

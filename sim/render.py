"""Offscreen rendering of goal envs: the GL backend, the maze camera, videos with the planner's
subgoal marked, and closing an env without GL noise at exit.

The video shows the planner's current subgoal as a marker drawn into the MuJoCo scene: a blue
sphere on a landmark subgoal, a translucent green sphere around the final goal when the planner
pursues it directly (the env draws the goal itself as its small red target site); with the
model's landmarks (``GetModelInfo``), every landmark as a small pink sphere. An env whose goal is
not a point (OGBench's arm tasks) says where a goal shows (``goal_points``: its cubes, the buttons
it would toggle), and its own renderer draws the spheres there (no caption).
"""
from __future__ import annotations

import ctypes.util
import gc
import os
from typing import Any, Protocol

import numpy as np

from l3p.sim import mazes

_LANDMARK_RGBA = np.array([0.1, 0.45, 1.0, 0.9])
_FINAL_GOAL_RGBA = np.array([0.1, 0.9, 0.2, 0.45])
_GRAPH_RGBA = np.array([1.0, 0.35, 0.85, 0.6])  # every landmark, pink: seen on dark and checkered floors
_TOPLEFT = 0  # mujoco.mjtGridPos.mjGRID_TOPLEFT (kept numeric: mujoco is imported lazily)


class Subgoal(Protocol):
    """What a video frame marks: a client Step (``l3p.clients.client.Step``) has these fields."""

    subgoal: Any
    subgoal_index: int
    replanned: bool


def ensure_offscreen_gl() -> str | None:
    """Pick an offscreen OpenGL backend for MuJoCo when none is set and there is no display.

    Must run before the first render (gymnasium reads MUJOCO_GL when it builds its viewer).
    OSMesa (pure software) works everywhere it is installed; EGL is the fallback.
    """
    if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ["MUJOCO_GL"] = "osmesa" if ctypes.util.find_library("OSMesa") else "egl"
    if os.environ.get("MUJOCO_GL") in ("osmesa", "egl"):
        os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    return os.environ.get("MUJOCO_GL")


def frame_whole_maze(env: Any) -> None:
    """Look at a maze straight from above, whole (the env's default camera is oblique)."""
    layout, scaling = mazes.maze_map(env), mazes.maze_scaling(env)
    renderer = _renderer(env)
    if renderer is not None:
        renderer.default_cam_config = {"distance": 1.2 * max(layout.shape) * scaling, "elevation": -90.0,
                                       "azimuth": 90.0, "lookat": [0.0, 0.0, 0.0]}


def close_env(env: Any) -> None:
    """Close the env and free its GL context now, not at interpreter exit.

    mujoco's OSMesa context frees itself again in ``__del__``; at interpreter exit its module
    is already torn down and that prints an ignored AttributeError. Collecting here avoids it.
    """
    env.close()
    renderer = _renderer(env)
    if renderer is not None and hasattr(renderer, "_viewers"):  # drop viewers (and GL contexts) while modules live
        renderer._viewers.clear()
        renderer.viewer = None
    gc.collect()


def inner_sim(env: Any) -> Any:
    """The MuJoCo env doing the work: Fetch envs are it; a maze wraps a point or ant env."""
    u = env.unwrapped
    return getattr(u, "point_env", None) or getattr(u, "ant_env", None) or u


def _renderer(env: Any) -> Any:
    return getattr(inner_sim(env), "mujoco_renderer", None)


def _maze_scaling(env: Any) -> float:
    return mazes.maze_scaling(env) if hasattr(env.unwrapped, "maze") else 1.0


def _marker_scale(env: Any, goal_dim: int) -> float:
    """Marker sizes are for Fetch goals, in metres; a maze's grow with its cells (1 m point, 4 m ant)."""
    return 1.0 if goal_dim == 3 else 6.0 * _maze_scaling(env)


def _marker_position(env: Any, subgoal: Any) -> np.ndarray:
    """3-d scene position of a subgoal: Fetch goals are 3-d; a maze's are (x, y) on the floor,
    drawn at the height of the env's own goal marker."""
    pos = np.asarray(subgoal, dtype=np.float64)
    if pos.size == 3:
        return pos
    u = env.unwrapped
    z = float(inner_sim(env).model.site_pos[u.target_site_id][2]) if hasattr(u, "target_site_id") else 0.0
    return np.array([pos[0], pos[1], z])


class VideoRecorder:
    """Frames of the env with the current subgoal marked, written as an H.264 mp4.

    MuJoCo envs (gymnasium's MujocoRenderer) get the marker and a caption drawn into the scene, an
    env with ``goal_points`` the markers where it says; any other env with ``render_mode="rgb_array"``
    is recorded as it renders itself.
    """

    def __init__(self, path: str | os.PathLike[str], fps: int = 25, landmarks: np.ndarray | None = None) -> None:
        """``landmarks`` [N, goal_dim]: the model's graph nodes, drawn faintly in every frame."""
        import imageio.v2 as imageio

        # imageio-ffmpeg starts ffmpeg with preexec_fn, i.e. a plain fork() of this process; with
        # a gRPC channel open, gRPC's fork handlers can abort that child before it execs ffmpeg
        # (a broken pipe here). Without preexec_fn Python spawns it safely (vfork + exec).
        os.environ.setdefault("IMAGEIO_FFMPEG_NO_PREVENT_SIGINT", "1")
        self.path = str(path)
        self._writer = imageio.get_writer(self.path, fps=fps, codec="libx264", macro_block_size=16)
        self.frames = 0
        self.landmarks = landmarks

    def capture(self, env: Any, step: Subgoal | None, caption: str) -> None:
        """Render one frame; ``step`` (a client Step) places the subgoal marker."""
        renderer = _renderer(env)
        if renderer is not None:
            # The offscreen viewer draws extra geoms ("markers", via mjv_initGeom into the scene)
            # once per render.
            viewer = renderer._get_viewer("rgb_array")
            if self.landmarks is not None:
                scale = _marker_scale(env, self.landmarks.shape[1])
                for landmark in self.landmarks:
                    viewer.add_marker(pos=_marker_position(env, landmark), size=np.full(3, 0.016 * scale),
                                      rgba=_GRAPH_RGBA)
            if step is not None:
                final = step.subgoal_index < 0
                radius = (0.035 if final else 0.025) * _marker_scale(env, len(step.subgoal))
                viewer.add_marker(
                    pos=_marker_position(env, step.subgoal),
                    size=np.full(3, radius),
                    rgba=_FINAL_GOAL_RGBA if final else _LANDMARK_RGBA,
                )
                what = "final goal" if final else f"landmark {step.subgoal_index}"
                caption += f"\nsubgoal: {what}{' *' if step.replanned else ''}"
            # Overlays accumulate text across renders in gymnasium; start each frame afresh.
            viewer._overlays.clear()
            for line in caption.split("\n"):
                viewer.add_overlay(_TOPLEFT, line, "")
        frame = None
        if renderer is None and hasattr(env.unwrapped, "goal_points"):  # OGBench's arm: its renderer draws ours
            frame = env.unwrapped.render(markers=self._goal_markers(env.unwrapped, step))
        self._writer.append_data(env.render() if frame is None else frame)
        self.frames += 1

    def _goal_markers(self, env: Any, step: Subgoal | None) -> list[tuple[np.ndarray, float, np.ndarray]]:
        """Spheres where the env's ``goal_points`` shows the landmarks (small, pink) and the subgoal."""
        markers = [(p, 0.008, _GRAPH_RGBA) for landmark in (() if self.landmarks is None else self.landmarks)
                   for p in env.goal_points(landmark)]
        if step is not None:
            final = step.subgoal_index < 0
            markers += [(p, 0.03 if final else 0.02, _FINAL_GOAL_RGBA if final else _LANDMARK_RGBA)
                        for p in env.goal_points(step.subgoal)]
        return markers

    def close(self) -> None:
        self._writer.close()

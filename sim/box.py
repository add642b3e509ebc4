"""The paper's two Fetch box scenes: FetchPickAndPlace with an open box on the table.

- ``l3p/FetchBoxDistractor-v0``: pick-and-place goals as FetchPickAndPlace-v4; the box is an
  obstacle (some goals lie over its footprint).
- ``l3p/FetchPlaceInsideBox-v0``: training distribution, the in-box goal (on the box floor, at its
  centre) on ``in_box_goal_p`` = 20 % of resets, a pick-and-place goal otherwise (the paper's
  curriculum); ``l3p/FetchPlaceInsideBoxTest-v0``: the in-box goal always, the task's test
  protocol, which the training id declares as its evaluation env (``l3p_eval_env_id``).

Observations (25-d, the box is not in them), goals (3-d), actions (4-d), reward, success (< 5 cm)
and 50-step episodes are FetchPickAndPlace-v4's. The box is static, 22 x 22 cm outside, 18 x 18 cm
inside and 10 cm high, placed aside on the table as in the authors' scene; its walls have stiff,
high-priority contacts so the gripper cannot squeeze the block through them (see the scene XML).
Block starts are redrawn until the block's footprint is clear of the box's outer walls.

Importing this module registers the ids (``l3p.sim.envs`` imports it with gymnasium-robotics).
The scene loads through gymnasium-robotics 1.4.2's ``_initialize_simulation`` hook (pinned in
pyproject.toml), from our XML with its asset paths pointed at gymnasium-robotics' own.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import gymnasium as gym
import gymnasium_robotics
import numpy as np
from gymnasium.utils.ezpickle import EzPickle
from gymnasium_robotics.envs.fetch import MujocoFetchEnv

SCENE = resources.files("l3p.sim") / "assets" / "fetch_box.xml"
FETCH_ASSETS = Path(gymnasium_robotics.__file__).parent / "envs" / "assets" / "fetch"

BOX_CENTER = np.array([1.25, 0.53, 0.40])  # the box body: its bottom centre on the table top (x, y, z)
BOX_OUTER_HALF = 0.11                       # outside half-width of the walls (m)
BOX_INNER_HALF = 0.09                       # inside half-width (m)
BOX_FLOOR_TOP = 0.41                        # z of the box floor's top face
BOX_WALL_TOP = 0.50                         # z of the walls' top
BLOCK_HALF = 0.025                          # the block's half-size
START_CLEARANCE = 0.01                      # a start's footprint stays this far from the outer walls
IN_BOX_GOAL = np.array([BOX_CENTER[0], BOX_CENTER[1], BOX_FLOOR_TOP + BLOCK_HALF])
TRAIN_IN_BOX_GOAL_P = 0.2                   # the paper's curriculum: in-box goal on 20 % of training resets

DISTRACTOR_ID = "l3p/FetchBoxDistractor-v0"
PLACE_INSIDE_ID = "l3p/FetchPlaceInsideBox-v0"
PLACE_INSIDE_TEST_ID = "l3p/FetchPlaceInsideBoxTest-v0"


def overlaps_box(xy: np.ndarray, margin: float = BLOCK_HALF + START_CLEARANCE) -> bool:
    """Whether a block centred at ``xy`` comes within ``margin - BLOCK_HALF`` of the outer walls."""
    return bool(np.all(np.abs(np.asarray(xy)[:2] - BOX_CENTER[:2]) < BOX_OUTER_HALF + margin))


class FetchBoxEnv(MujocoFetchEnv, EzPickle):
    """FetchPickAndPlace-v4 with the box on the table (Box-Distractor-PickAndPlace)."""

    def __init__(self, reward_type: str = "sparse", **kwargs):
        initial_qpos = {
            "robot0:slide0": 0.405,
            "robot0:slide1": 0.48,
            "robot0:slide2": 0.0,
            # PickAndPlace's block rests at (1.25, 0.53), inside the box: the block settles away from it.
            "object0:joint": [1.25, 0.95, 0.4, 1.0, 0.0, 0.0, 0.0],
        }
        MujocoFetchEnv.__init__(
            self, model_path=str(SCENE), has_object=True, block_gripper=False, n_substeps=20,
            gripper_extra_height=0.2, target_in_the_air=True, target_offset=0.0, obj_range=0.15,
            target_range=0.15, distance_threshold=0.05, initial_qpos=initial_qpos, reward_type=reward_type,
            **kwargs,
        )
        EzPickle.__init__(self, reward_type=reward_type, **kwargs)

    @property
    def l3p_obstacles(self) -> np.ndarray:
        """The box's floor and walls as axis-aligned boxes [k, 2 (low, high), 3] in goal (world)
        coordinates, read from the scene: landmark pictures draw them (l3p.sim.draw)."""
        names = (self._mujoco.mj_id2name(self.model, self._mujoco.mjtObj.mjOBJ_GEOM, i) for i in range(self.model.ngeom))
        ids = [i for i, name in enumerate(names) if name and name.startswith("box0:")]
        centre, half = self.data.geom_xpos[ids], self.model.geom_size[ids]
        return np.stack([centre - half, centre + half], axis=1)

    def _initialize_simulation(self) -> None:
        # The scene from a string, its includes and asset folders pointed at gymnasium-robotics'.
        xml = Path(self.fullpath).read_text().replace("FETCH_ASSETS", str(FETCH_ASSETS))
        self.model = self._mujoco.MjModel.from_xml_string(xml)
        self.data = self._mujoco.MjData(self.model)
        self._model_names = self._utils.MujocoModelNames(self.model)
        self.model.vis.global_.offwidth = self.width
        self.model.vis.global_.offheight = self.height
        self._env_setup(initial_qpos=self.initial_qpos)
        self.initial_time = self.data.time
        self.initial_qpos = np.copy(self.data.qpos)
        self.initial_qvel = np.copy(self.data.qvel)

    def _reset_sim(self) -> bool:
        self._mujoco.mj_resetData(self.model, self.data)
        self.data.time = self.initial_time
        self.data.qpos[:] = np.copy(self.initial_qpos)
        self.data.qvel[:] = np.copy(self.initial_qvel)
        # PickAndPlace's start (within obj_range of the gripper, >= 10 cm from it), redrawn while the
        # block's footprint would touch the box (the authors' rule let ~15 % of starts overlap a wall).
        gripper = self.initial_gripper_xpos[:2]
        xy = gripper
        while np.linalg.norm(xy - gripper) < 0.1 or overlaps_box(xy):
            xy = gripper + self.np_random.uniform(-self.obj_range, self.obj_range, size=2)
        qpos = self._utils.get_joint_qpos(self.model, self.data, "object0:joint")
        qpos[:2] = xy
        self._utils.set_joint_qpos(self.model, self.data, "object0:joint", qpos)
        self._mujoco.mj_forward(self.model, self.data)
        return True


class FetchPlaceInsideBoxEnv(FetchBoxEnv):
    """The box scene with the in-box goal on ``in_box_goal_p`` of resets (Place-Inside-Box)."""

    l3p_eval_env_id = PLACE_INSIDE_TEST_ID  # evaluated on the in-box goal alone

    def __init__(self, in_box_goal_p: float = TRAIN_IN_BOX_GOAL_P, reward_type: str = "sparse", **kwargs):
        if not 0.0 <= in_box_goal_p <= 1.0:
            raise ValueError(f"in_box_goal_p must be in [0, 1], got {in_box_goal_p!r}")
        self.in_box_goal_p = in_box_goal_p
        super().__init__(reward_type=reward_type, **kwargs)
        EzPickle.__init__(self, in_box_goal_p=in_box_goal_p, reward_type=reward_type, **kwargs)

    def _sample_goal(self) -> np.ndarray:
        if self.np_random.uniform() < self.in_box_goal_p:
            return IN_BOX_GOAL.copy()
        return super()._sample_goal()


gym.register(DISTRACTOR_ID, entry_point=f"{__name__}:FetchBoxEnv", max_episode_steps=50)
gym.register(PLACE_INSIDE_ID, entry_point=f"{__name__}:FetchPlaceInsideBoxEnv", max_episode_steps=50)
gym.register(PLACE_INSIDE_TEST_ID, entry_point=f"{__name__}:FetchPlaceInsideBoxEnv", max_episode_steps=50,
             kwargs={"in_box_goal_p": 1.0})

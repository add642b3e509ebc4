"""Export trained networks and landmarks as a self-contained ONNX model bundle (docs/bundle.md).

Normalization and clipping are part of every graph, so serving feeds raw observations and goals.
After writing, the bundle is checked: each graph is run by onnxruntime on random inputs and must
match the torch networks within 1e-4.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import io
import json
import shutil
import re
import subprocess
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import helper, numpy_helper

from l3p.core.bundle_format import (FORMAT, FORMAT_VERSION, GRAPHS, MANIFEST, MODEL_NAME, BundleDir, bundle_digest,
                                    graph_file, planner_defaults, read_graph, read_manifest)
from l3p.core.errors import L3PError
from l3p.core.config import OPTIONS, PlannerConfig
from l3p.core.names import DISTRIBUTION
from l3p.core.options import without_dead
from l3p.core.signing import load_private_key, sign_bundle
from l3p.sim.envs import EnvSpec, env_spec, make_env
from l3p.training.agent import L3PAgent
from l3p.training.config import TrainConfig
from l3p.training.edges import near_labels

OPSET = 17
CENTRE_ITERATIONS = 10  # centred_landmarks: Lloyd iterations (they settle within a few)
# float32 graphs: |onnx - torch| <= ATOL + RTOL * |torch| (distances reach hundreds of steps, where
# float32 rounding alone is ~1e-5 relative).
PARITY_ATOL = 1e-4
PARITY_RTOL = 1e-5
# Actions: PARITY_ACTION_ATOL x the action bound. Two float32 GEMM libraries sum in different
# orders, and a trained actor's hidden activations are large: on the ant's actor (680 k env steps)
# onnxruntime and torch differ by up to 3e-4 in an unsaturated action; an export bug is far larger.
PARITY_ACTION_ATOL = 1e-3


class BundleExistsError(L3PError):
    """The output directory exists and ``force`` was not given."""


class ExportError(L3PError):
    """The agent cannot make a servable bundle (e.g. no landmarks yet); nothing was written."""


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _export_graph(module: torch.nn.Module, args: tuple, inputs: list[str], outputs: list[str], path: Path) -> None:
    dynamic = {name: {0: "batch"} for name in inputs + outputs}
    buf = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated but needs no onnxscript and handles these MLPs exactly.
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, buf, input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic, opset_version=OPSET, dynamo=False)
    path.write_bytes(buf.getvalue())


def _landmarks_graph(landmarks: np.ndarray, path: Path) -> None:
    """An input-less graph whose only output is the landmark matrix (stored as an initializer)."""
    init = numpy_helper.from_array(landmarks.astype(np.float32), name="landmarks_value")
    out = helper.make_tensor_value_info("landmarks", onnx.TensorProto.FLOAT, list(landmarks.shape))
    graph = helper.make_graph([helper.make_node("Identity", ["landmarks_value"], ["landmarks"])],
                              "landmarks", inputs=[], outputs=[out], initializer=[init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="l3p",
                              ir_version=8)  # onnxruntime reads IR <= 13; opset 17 needs only 8
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())


def code_state(checkout: Path | None = None) -> dict[str, Any]:
    """What a bundle records about the code that made it: ``code_version``, the installed
    distribution's version plus ``git describe --dirty`` when running from a source checkout of this
    project (an installed wheel has no git history to describe); and when that is ``-dirty``,
    ``uncommitted``: the tracked files that differ from the commit named, so a reader knows how far
    the code was from it. ``checkout``: the source folder (default: the one this package runs from)."""
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = "unknown"
    checkout = checkout or _source_checkout()
    if checkout is None:
        return {"code_version": version}
    described = _git(checkout, "describe", "--always", "--dirty")
    if not described:
        return {"code_version": version}
    state: dict[str, Any] = {"code_version": f"{version} (git {described})"}
    if described.endswith("-dirty"):  # tracked files only, as --dirty counts them
        state["uncommitted"] = sorted((_git(checkout, "diff", "--name-only", "HEAD") or "").splitlines())
    return state


def _git(checkout: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=checkout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _source_checkout() -> Path | None:
    """The project folder this package runs from, if it is a git checkout of this project: the
    package folder's parent holds .git and a pyproject.toml naming this distribution."""
    root = Path(__file__).resolve().parent.parent
    try:
        pyproject = (root / "pyproject.toml").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    # A line match, not a TOML parse: tomllib is not in Python 3.10.
    named = re.search(rf'^name\s*=\s*"{re.escape(DISTRIBUTION)}"\s*$', pyproject, re.MULTILINE)
    return root if named and (root / ".git").exists() else None


def export_bundle(agent: L3PAgent, out_dir: Path, provenance: dict, force: bool = False,
                  planner_overrides: dict | None = None, landmarks: np.ndarray | None = None,
                  sign_key: Path | None = None, sign_model: str | None = None,
                  edges: dict | None = None) -> Path:
    """Write the bundle. ``planner_overrides`` change the served planner defaults (validated; recorded
    in the provenance), e.g. a local horizon chosen on validation episodes. ``landmarks`` replace
    the decoded cluster centroids (e.g. `gls_landmarks`); the provenance should say so. The graphs
    are traced from a CPU copy of a GPU learner: the same bundle whatever the training device.
    ``sign_key``: an Ed25519 private key (l3p keygen) that signs the bundle (core/signing.py) for
    model ``sign_model`` (the name servers serve it as) before it is renamed into place, so no one
    ever sees it complete but unsigned. ``edges``: the manifest's data-supported landmark edges
    (training/edges.py `DataGraph.manifest_edges`); None keeps every pair.
    """
    _check_signing(sign_key, sign_model)
    key = None if sign_key is None else load_private_key(sign_key)  # a bad key fails before the work
    agent = agent.on_cpu()
    cfg = agent.cfg
    if landmarks is None and not agent.clusters_ready:
        raise ExportError("the run has no landmarks yet (planning had not started); train longer "
                          f"(planning starts after {cfg.planning_start_episodes} episodes), resume the run, or "
                          "give replay goals as landmarks (l3p export --landmarks gls)")
    planner = cfg.planner
    if planner_overrides:
        unknown = sorted(set(planner_overrides) - set(OPTIONS))
        if unknown:
            raise ExportError(f"unknown planner option {', '.join(unknown)}; options: {', '.join(OPTIONS)}")
        try:
            planner = planner.replace(**planner_overrides)
        except ValueError as exc:  # names the option and its range
            raise ExportError(f"bad planner override: {exc}") from None
        provenance = {**provenance, "planner_overrides": planner_overrides}
    nodes = agent.landmarks() if landmarks is None else np.asarray(landmarks, np.float32)
    return _write_in_place(Path(out_dir), force, key, sign_model,
                           lambda tmp: _write_bundle(agent, tmp, planner, provenance, edges, nodes))


def rebundle(source: Path, out_dir: Path, planner_overrides: dict, command: str, force: bool = False,
             sign_key: Path | None = None, sign_model: str | None = None) -> Path:
    """A copy of the bundle ``source`` with its served planner defaults changed by ``planner_overrides``
    (validated): the same graphs and edges, each file checked against the manifest as it is copied, and
    the change recorded in the provenance (``rebundled``: the source's digest, the command, the code).
    For tuning what a bundle serves when its training run is gone."""
    _check_signing(sign_key, sign_model)
    if Path(out_dir).resolve() == Path(source).resolve():
        raise ExportError(f"{out_dir} is the bundle being copied: write the new bundle to another directory")
    key = None if sign_key is None else load_private_key(sign_key)
    with BundleDir.open(source) as bundle:
        manifest = read_manifest(bundle)
        try:  # the overrides may mend a source that serves a setting that does nothing
            planner = planner_defaults(manifest, planner_overrides)
        except (TypeError, ValueError) as exc:  # names the option and its range
            raise ExportError(f"bad planner override: {exc}") from None
        files = {entry["path"]: read_graph(bundle, entry) for entry in manifest["files"].values()}
    served = {**dataclasses.asdict(PlannerConfig()), **manifest["planner"]}
    # The same graphs with settings the planner acts alike on: the source's evaluations hold for it.
    same_actions = without_dead(served, OPTIONS) == without_dead(dataclasses.asdict(planner), OPTIONS)
    provenance = dict(manifest.get("provenance", {}))
    provenance["planner_overrides"] = {**provenance.get("planner_overrides", {}), **planner_overrides}
    provenance["rebundled"] = [*provenance.get("rebundled", []), {
        "from_sha256": bundle_digest(manifest), "command": command, "planner": planner_overrides,
        "same_actions": same_actions, **code_state(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}]
    manifest = {**manifest, "planner": dataclasses.asdict(planner), "provenance": provenance}

    def write(tmp: Path) -> None:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, allow_nan=False))

    return _write_in_place(Path(out_dir), force, key, sign_model, write)


def _check_signing(sign_key: Path | None, sign_model: str | None) -> None:
    if sign_model is not None and sign_key is None:
        raise ExportError("--model names the model a signature is for: it goes with --sign-key KEY")
    if sign_key is not None and not (isinstance(sign_model, str) and MODEL_NAME.fullmatch(sign_model)):
        raise ExportError("--sign-key needs --model NAME (1-64 of A-Z a-z 0-9 _ . -, the first a letter or digit): "
                          "the model the servers serve the bundle as, its directory in the repository "
                          "(DIR/NAME/VERSION); a signature is valid for that model only")


def _write_in_place(out_dir: Path, force: bool, key, sign_model: str | None, write) -> Path:
    """``write(tmp)`` fills a directory beside ``out_dir``, signed with ``key`` when given, then renamed
    into place once complete: a failed export leaves no partial bundle (and, with ``force``, the
    previous bundle untouched), and no one ever sees it complete but unsigned."""
    if out_dir.exists() and not force:
        raise BundleExistsError(f"{out_dir} already exists; pass --force to overwrite it")
    final_dir, out_dir = out_dir, out_dir.with_name(f".{out_dir.name}.partial")
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    try:
        write(out_dir)
        if key is not None:
            sign_bundle(out_dir, key, sign_model)
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise
    if final_dir.exists():
        shutil.rmtree(final_dir)
    out_dir.rename(final_dir)
    return final_dir


def _write_bundle(agent: L3PAgent, out_dir: Path, planner, provenance: dict, edges: dict | None,
                  landmarks: np.ndarray) -> None:
    cfg, spec = agent.cfg, agent.spec

    obs = torch.zeros(1, spec.obs_dim)
    goal = torch.zeros(1, spec.goal_dim)
    path = {name: out_dir / graph_file(name) for name in GRAPHS}
    _export_graph(agent.actor, (obs, goal), ["obs", "goal"], ["action"], path["actor"])
    _export_graph(agent.pi_distance, (obs, goal), ["obs", "goal"], ["distance", "action"], path["distance"])
    _export_graph(agent.value, (goal, goal), ["goal_a", "goal_b"], ["value"], path["value"])
    _landmarks_graph(landmarks, path["landmarks"])

    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "env_id": spec.env_id,
        "dims": {"obs": spec.obs_dim, "goal": spec.goal_dim, "action": spec.action_dim},
        "action_low": list(spec.action_low), "action_high": list(spec.action_high),
        "gamma": cfg.gamma, "n_landmarks": int(landmarks.shape[0]),
        "planner": dataclasses.asdict(planner),
        **({"edges": edges} if edges is not None else {}),
        "files": {n: {"path": graph_file(n), "sha256": sha256(path[n])} for n in GRAPHS},
        "provenance": {**provenance, **code_state(),
                       "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")},
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, allow_nan=False, default=_json_default))
    check_parity(agent, out_dir, landmarks=landmarks)


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


def gls_landmarks(agent: L3PAgent, replay_goals: np.ndarray, seed: int = 0, n: int | None = None) -> np.ndarray:
    """``n`` (default: the run's ``n_landmarks``) achieved goals spread out by GLS in the learned latent
    space: landmarks that are states the robot has visited (an alternative to decoded centroids,
    which can fall inside obstacles)."""
    rng = np.random.default_rng(seed)
    return replay_goals[agent.gls_indices(replay_goals, n or agent.cfg.n_landmarks, rng)].astype(np.float32)


def centred_landmarks(landmarks: np.ndarray, goals: np.ndarray, iterations: int = CENTRE_ITERATIONS) -> np.ndarray:
    """``landmarks`` moved into the middle of the ground ``goals`` cover (export_landmarks 'centred'), by
    Lloyd iterations: each recorded goal goes to its nearest landmark, and each landmark moves to the
    goal of its share nearest the share's mean. Farthest-point picks (GLS) lie at the rim of the data,
    which in a maze is along the walls; these stay recorded goals, spread as evenly, down the middle."""
    nodes = np.array(landmarks, np.float64)
    goals = np.asarray(goals, np.float64)
    for _ in range(iterations):
        share = near_labels(goals, nodes, np.inf)
        counts = np.bincount(share, minlength=len(nodes))
        means = np.zeros_like(nodes)
        np.add.at(means, share, goals)
        means /= np.maximum(counts, 1)[:, None]
        gap = ((goals - means[share]) ** 2).sum(axis=1)
        order = np.lexsort((gap, share))  # by share, then nearest its mean first
        first = order[np.r_[True, share[order][1:] != share[order][:-1]]]
        nodes[share[first]] = goals[first]
    return nodes.astype(np.float32)


def check_parity(agent: L3PAgent, bundle: Path, batch_sizes: tuple[int, ...] = (1, 81), seed: int = 0,
                 landmarks: np.ndarray | None = None) -> float:
    """Largest |onnxruntime − torch| / (atol + PARITY_RTOL·|torch|) over every graph on random raw
    inputs (1 = the tolerance; atol PARITY_ATOL, for actions PARITY_ACTION_ATOL x the action bound);
    raises ExportError above 1."""
    rng = np.random.default_rng(seed)
    spec = agent.spec
    action_atol = PARITY_ACTION_ATOL * spec.action_max
    worst = 0.0
    sess = {n: ort.InferenceSession(str(Path(bundle) / graph_file(n)), providers=["CPUExecutionProvider"])
            for n in GRAPHS}
    o_mean, o_std = agent.o_norm.mean.numpy(), agent.o_norm.std.numpy()
    g_mean, g_std = agent.g_norm.mean.numpy(), agent.g_norm.std.numpy()
    for b in batch_sizes:
        obs = (o_mean + 2 * o_std * rng.standard_normal((b, spec.obs_dim))).astype(np.float32)
        goal = (g_mean + 2 * g_std * rng.standard_normal((b, spec.goal_dim))).astype(np.float32)
        goal_b = (g_mean + 2 * g_std * rng.standard_normal((b, spec.goal_dim))).astype(np.float32)
        d_t, a_t = agent.distance_fn(obs, goal)
        (a_o,) = sess["actor"].run(None, {"obs": obs, "goal": goal})
        d_o, a_o2 = sess["distance"].run(None, {"obs": obs, "goal": goal})
        (v_o,) = sess["value"].run(None, {"goal_a": goal, "goal_b": goal_b})
        pairs = [(a_t, a_o, action_atol), (a_t, a_o2, action_atol), (d_t, d_o, PARITY_ATOL),
                 (agent.value_fn(goal, goal_b), v_o, PARITY_ATOL)]
        worst = max([worst] + [float(np.max(np.abs(t - o) / (atol + PARITY_RTOL * np.abs(t)))) for t, o, atol in pairs])
    (lm,) = sess["landmarks"].run(None, {})
    expected = agent.landmarks() if landmarks is None else landmarks
    worst = max(worst, float(np.max(np.abs(lm - expected))) / PARITY_ATOL if lm.size else 0.0)
    if worst > 1.0:
        raise ExportError(f"exported graphs differ from torch by {worst:.2f}x the tolerance "
                          f"({PARITY_ATOL} + {PARITY_RTOL} x |value|; actions {PARITY_ACTION_ATOL} x the bound)")
    return worst


def agent_from_checkpoint(state: dict) -> L3PAgent:
    cfg = TrainConfig.from_dict(state["config"])
    if "spec" in state:  # trained from a recording alone: its spec, no env
        spec = EnvSpec(**{**state["spec"], "action_low": tuple(state["spec"]["action_low"]),
                          "action_high": tuple(state["spec"]["action_high"])})
    else:
        env = make_env(cfg.env_id)
        spec = env_spec(env)
        env.close()
    agent = L3PAgent(cfg, spec, device="cpu")  # export runs on the CPU, whatever the run trained on
    agent.load_state_dict(state["agent"])
    return agent


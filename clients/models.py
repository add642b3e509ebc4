"""``l3p models --server HOST:PORT``: what a planner server serves, a row per model (its name,
version, env, dims, landmarks, signer and state), or the same as JSON. The robot library alone:
it works in the base install, on the robot's computer."""
from __future__ import annotations

import json

from l3p.clients.client import PlannerError
from l3p.clients.connection import open_client, unreachable
from l3p.clients.run_config import ModelsConfig
from l3p.protos import l3p_planner_pb2 as pb

COLUMNS = ("name", "version", "env", "obs/goal/action", "landmarks", "signed_by", "state")


def describe(status: pb.ModelStatus, default: str) -> dict:
    """One model as the table and the JSON show it."""
    info = status.info
    if not status.loaded:
        state = f"not loaded: {status.last_error}"
    else:
        state = f"serving, {status.live_sessions} live episode{'s' if status.live_sessions != 1 else ''}"
        if status.draining_versions:
            state += f", draining {', '.join(status.draining_versions)}"
        if status.last_error:
            state += f"; a newer version was refused: {status.last_error}"
    return {"name": info.model, "default": info.model == default, "version": info.version,
            "env": info.env_id if status.loaded else "",
            "dims": [info.obs_dim, info.goal_dim, info.action_dim] if status.loaded else [],
            "landmarks": info.n_landmarks if status.loaded else None, "signed_by": info.signed_by,
            "bundle_sha256": info.bundle_sha256, "loaded": status.loaded, "state": state}


def table(models: list[dict]) -> str:
    rows = [COLUMNS] + [(m["name"] + (" *" if m["default"] else ""), m["version"] or "-", m["env"] or "-",
                         "/".join(map(str, m["dims"])) or "-",
                         "-" if m["landmarks"] is None else str(m["landmarks"]), m["signed_by"] or "-", m["state"])
                        for m in models]
    widths = [max(len(row[c]) for row in rows) for c in range(len(COLUMNS) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths)), row[-1]]).rstrip() for row in rows]
    return "\n".join([*lines, "* the default model: requests that name none get it"])


def run_models(config: ModelsConfig) -> int:
    client = open_client(config)
    try:
        answer = client.list_models()
    except PlannerError as err:
        raise unreachable(config, err) from None
    finally:
        client.close()
    models = [describe(status, answer.default_model) for status in answer.models]
    print(json.dumps(models, indent=2) if config.json else table(models))
    return 0

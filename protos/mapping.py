"""The wire enums <-> the planner's names (`l3p.core.names`), written once for the server and the
client."""

from __future__ import annotations

from l3p.core.names import MODES, SEARCHES
from l3p.protos import l3p_planner_pb2 as pb

MODE_ENUM: dict[str, int] = {name: pb.PlannerMode.Value(f"PLANNER_MODE_{name.upper()}") for name in MODES}
SEARCH_ENUM: dict[str, int] = {name: pb.SearchKind.Value(f"SEARCH_KIND_{name.upper()}") for name in SEARCHES}
MODE_NAME: dict[int, str] = {value: name for name, value in MODE_ENUM.items()}
SEARCH_NAME: dict[int, str] = {value: name for name, value in SEARCH_ENUM.items()}

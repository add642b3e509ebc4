"""The committed stubs are exactly what grpc_tools generates from the committed .proto."""
from __future__ import annotations

from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ("l3p_planner_pb2.py", "l3p_planner_pb2.pyi", "l3p_planner_pb2_grpc.py")
REGENERATE = "bash scripts/protos"


def test_generated_code_matches_the_proto(tmp_path):
    # Compiled under its installed path, so the stubs import `from l3p.protos import ...`.
    rc = protoc.main(["protoc", f"-Il3p/protos={ROOT / 'protos'}", f"--python_out={tmp_path}", f"--pyi_out={tmp_path}",
                      f"--grpc_python_out={tmp_path}", str(ROOT / "protos" / "l3p_planner.proto")])
    assert rc == 0
    for name in GENERATED:
        fresh = (tmp_path / "l3p" / "protos" / name).read_text()
        committed = (ROOT / "protos" / name).read_text()
        assert fresh == committed, f"protos/{name} drifted from the .proto; regenerate with: {REGENERATE}"


def test_service_is_versioned():
    from l3p.protos import l3p_planner_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["Planner"]
    assert service.full_name == "l3p.v1.Planner"
    assert [m.name for m in service.methods] == ["GetModelInfo", "StartEpisode", "Act", "EndEpisode", "Control",
                                                    "ListModels", "ReloadModels"]

#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.sh installs on a GPU machine that reaches no package index, as one
# tar.xz: mujoco, gymnasium, gymnasium-robotics and ogbench at the versions this Python environment
# holds (the project's), with their dependencies, for CPython 3.12 on x86-64 Linux (the lent GPU
# machines' Python), fetched by `pip download --only-binary=:all:`. Left out, to fit beside the
# checkout in what a lent machine's call carries (64 MiB in all):
# - numpy and pillow: every torch image holds them (the check's install names them if not);
# - what l3p never reads: mujoco's experimental viewer, gymnasium-robotics' Adroit-hand and kitchen
#   assets, ogbench's manipulation-arm descriptions (and dm_control, which only those arms import:
#   ogbench is installed without its dependencies).
# The wheels are repacked uncompressed, so that xz compresses them as one (mujoco 3.11.0's set: 8.4 MB,
# from 60 MB as published). Needs pip, xz and an index; run in the project's environment.
#
#   bash benchmarks/gpu_wheels.sh l3p-wheels-cp312.tar.xz
#   bash benchmarks/gpu_wheels.sh --python-version 3.11 l3p-wheels-cp311.tar.xz   # another Python
set -euo pipefail

PYTHON=python3
PYTHON_VERSION=3.12
OUTPUT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --python) PYTHON=$2; shift 2 ;;
    --python-version) PYTHON_VERSION=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_wheels.sh: unknown option $1" >&2; exit 2 ;;
    *) OUTPUT=$1; shift ;;
  esac
done
[[ -n $OUTPUT ]] || { echo "usage: gpu_wheels.sh [--python PY] [--python-version X.Y] OUTPUT.tar.xz" >&2; exit 2; }
OUTPUT=$(realpath "$OUTPUT")

version() { "$PYTHON" -c "import importlib.metadata as m; print(m.version('$1'))"; }
WITH_DEPS=("mujoco==$(version mujoco)" "gymnasium==$(version gymnasium)"
           "gymnasium-robotics==$(version gymnasium-robotics)")
NO_DEPS=("ogbench==$(version ogbench)")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
DOWNLOAD=("$PYTHON" -m pip download -q --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp
          --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 -d "$TMP/download")
"${DOWNLOAD[@]}" "${WITH_DEPS[@]}"
"${DOWNLOAD[@]}" --no-deps "${NO_DEPS[@]}"

mkdir "$TMP/wheels"
printf '%s\n' "${WITH_DEPS[@]}" > "$TMP/wheels/requirements.txt"
printf '%s\n' "${NO_DEPS[@]}" > "$TMP/wheels/requirements-no-deps.txt"
"$PYTHON" - "$TMP/download" "$TMP/wheels" <<'EOF'
"""Each wheel repacked uncompressed, less the folders l3p never reads (and their RECORD lines)."""
import sys
import zipfile
from pathlib import Path

LEFT_OUT = ("numpy-", "pillow-")
UNREAD = ("mujoco/experimental/", "gymnasium_robotics/envs/assets/adroit_hand/",
          "gymnasium_robotics/envs/assets/kitchen_franka/", "ogbench/manipspace/descriptions/")
UNREAD_B = tuple(prefix.encode() for prefix in UNREAD)
source, target = Path(sys.argv[1]), Path(sys.argv[2])
for wheel in sorted(source.glob("*.whl")):
    if wheel.name.lower().startswith(LEFT_OUT):
        continue
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(target / wheel.name, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if info.filename.startswith(UNREAD):
                continue
            data = zin.read(info.filename)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(UNREAD_B))
            zout.writestr(info, data, compress_type=zipfile.ZIP_STORED)
    print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB as published")
EOF
tar -C "$TMP/wheels" -cf - . | xz -T0 -6 > "$OUTPUT"
echo "wrote $OUTPUT ($(du -h "$OUTPUT" | cut -f1)): ${WITH_DEPS[*]} (with dependencies), ${NO_DEPS[*]} (without)"

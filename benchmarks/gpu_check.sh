#!/usr/bin/env bash
# The GPU check in one command, for a bare GPU machine (torch installed, no internet) with the
# project's wheels carried beside the checkout as one tar.xz (benchmarks/gpu_wheels.sh makes it).
# Run it from anywhere: it works in its own directory (--work), installs l3p from a copy of the
# checkout and the carried wheels into an environment of its own that sees the machine's torch, and
# runs benchmarks/gpu_check.py's parts in turn, each writing its JSON as it finishes:
#   table    update time per optimizer step, eager and captured, batch 256 / 1024 / 4096
#   offline  50,000 optimizer steps offline on the GPU (a pointmaze-large-stitch dataset generated
#            here while the table runs), its time and the GPU's utilization (nvidia-smi)
#   push     FetchPush-v4 from scratch for 5 minutes (--preset-option gpu, 12 rollout workers),
#            progress lines as it goes
# Then OUT/gpu_check.json holds them all, with the machine; OUT/gpu_check.log the whole output.
# --dry-run: the same steps on the CPU with tiny sizes, in the current Python environment.
#
#   bash CHECKOUT/benchmarks/gpu_check.sh --wheels l3p-wheels-cp312.tar.xz --out gpu_check
#   bash CHECKOUT/benchmarks/gpu_check.sh --dry-run --out /tmp/gpu_check_dry
set -euo pipefail

CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=gpu_check
WORK=${TMPDIR:-/tmp}/l3p-gpu-check
WHEELS=""
PARTS=table,offline,push
OFFLINE_STEPS=50000
DATASET_EPISODES=1000
PUSH_MINUTES=5
TIME_LIMIT=""
PYTHON=python3
DRY=0

usage() {
  cat <<'EOF'
usage: gpu_check.sh [--wheels FILE.tar.xz] [--out DIR] [--work DIR] [--parts table,offline,push]
                    [--offline-steps N] [--dataset-episodes N] [--push-minutes M] [--time-limit S]
                    [--python PY] [--dry-run]
  --wheels FILE          the wheels tar.xz from benchmarks/gpu_wheels.sh; without it the current Python
                         environment must hold l3p with its training extra already
  --out DIR              the JSON files and the log (default ./gpu_check)
  --work DIR             the environment, dataset and runs (default $TMPDIR/l3p-gpu-check)
  --parts LIST           which parts, in this order (default table,offline,push)
  --offline-steps N      optimizer steps of the offline run (default 50000)
  --dataset-episodes N   episodes of the generated dataset (default 1000; OGBench's file has 5000)
  --push-minutes M       the FetchPush-v4 run's budget (default 5)
  --time-limit S         end within S seconds of the start: the push run gets what is left of it
  --python PY            the interpreter that holds torch (default python3)
  --dry-run              on the CPU, tiny sizes, no wheels needed
EOF
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --wheels) WHEELS=$(realpath "$2"); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --parts) PARTS=$2; shift 2 ;;
    --offline-steps) OFFLINE_STEPS=$2; shift 2 ;;
    --dataset-episodes) DATASET_EPISODES=$2; shift 2 ;;
    --push-minutes) PUSH_MINUTES=$2; shift 2 ;;
    --time-limit) TIME_LIMIT=$2; shift 2 ;;
    --python) PYTHON=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

mkdir -p "$OUT" "$WORK"
OUT=$(realpath "$OUT")
WORK=$(realpath "$WORK")
for part in ${PARTS//,/ } gpu_check; do rm -f "$OUT/$part.json"; done  # another call's parts stay
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
cd "$WORK"  # outside the checkout: everything runs on the installed package

DEVICE=cuda
DATASET_ARGS=(--episodes "$DATASET_EPISODES")
TABLE_ARGS=()
OFFLINE_ARGS=()
PUSH_ARGS=()
if [[ $DRY == 1 ]]; then
  # Tiny sizes: every stage (warm-up, updates, clusters, refresh, evaluation, checkpoint) runs once or twice.
  DEVICE=cpu
  OFFLINE_STEPS=60
  PUSH_MINUTES=3
  DATASET_ARGS=(--episodes 10 --steps 60)
  NETS=(--set hidden=32 --set layers=2 --set ae_hidden=16 --set gls_sample=60 --set cluster_batch=20)
  TABLE_ARGS=(--batches 16 32 --steps 3 "${NETS[@]}" --set n_envs=2 --set warmup_episodes=2 --set n_landmarks=6
              --set buffer_episodes=50 --set updates_per_cycle=4)
  OFFLINE_ARGS=("${NETS[@]}" --set updates_per_cycle=20 --set batch_size=64 --set n_landmarks=8
                --set landmarks_after_updates=20 --set eval_every_cycles=2 --set eval_episodes=2
                --set checkpoint_every_cycles=2 --set eval_max_steps=40)
  PUSH_ARGS=(--collectors 1 "${NETS[@]}" --set n_envs=2 --set warmup_episodes=2 --set planning_start_episodes=2
             --set n_landmarks=6 --set extra_landmarks=3 --set buffer_episodes=50 --set updates_per_cycle=4
             --set batch_size=32 --set total_env_steps=400 --set eval_every_cycles=2 --set eval_episodes=2
             --set checkpoint_every_cycles=2 --set 'device="cpu"')
fi
echo "gpu_check: checkout $CHECKOUT, work $WORK, out $OUT, parts $PARTS," \
     "device $DEVICE$([[ $DRY == 1 ]] && echo ' (dry run)')"

# ----- the environment -----
PY=$PYTHON
if [[ -n $WHEELS ]]; then
  VENV=$WORK/venv
  if [[ -x $VENV/bin/python ]] \
     && "$VENV/bin/python" -c "import l3p.training.trainer, gymnasium_robotics, ogbench" 2>/dev/null; then
    echo "reusing the environment in $VENV"
  else
    rm -rf "$VENV" "$WORK/wheels" "$WORK/src"
    mkdir -p "$WORK/wheels" "$WORK/src"
    # Python's tarfile reads xz whether or not the machine has the xz tool.
    "$PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
      "$WHEELS" "$WORK/wheels"
    # Without pip of its own (a Python without ensurepip makes it too): the machine's pip installs into it.
    "$PYTHON" -m venv --without-pip "$VENV"
    # The machine's packages (torch, numpy, ...) stay visible after the environment's own: its
    # interpreter's site directories go on the path (a venv made with --system-site-packages from
    # another venv would see the system's packages, not that venv's).
    PURELIB=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$PYTHON" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
      > "$PURELIB/machine-site.pth"
    PIP=("$PYTHON" -m pip --python "$VENV/bin/python" install -q --no-index --no-cache-dir --find-links "$WORK/wheels")
    "${PIP[@]}" -r "$WORK/wheels/requirements.txt"
    "${PIP[@]}" --no-deps -r "$WORK/wheels/requirements-no-deps.txt"
    # l3p from a copy of its sources (the checkout stays as it is), without its declared
    # dependencies: torch is the machine's, the simulators came with the wheels. Its build reads
    # pyproject.toml's license as setuptools >= 77 does (the carried one, where the machine's is older).
    "${PIP[@]}" "setuptools>=77"
    tar -C "$CHECKOUT" --exclude=./.git --exclude='./.venv*' --exclude=./runs --exclude=./data --exclude=./models \
      --exclude=./docs --exclude=./tests --exclude=./site --exclude=./build --exclude=./.gpu_check \
      --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -C "$WORK/src" -xf -
    "${PIP[@]}" --no-deps --no-build-isolation "$WORK/src"
  fi
  PY=$VENV/bin/python
fi
"$PY" -c "import torch, l3p.training.trainer, l3p.sim.envs
print('python', __import__('sys').version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda,
      'devices', torch.cuda.device_count())" || {
  echo "gpu_check: $PY cannot import torch and l3p's training code; give --wheels FILE (benchmarks/gpu_wheels.sh)" >&2
  exit 2
}

# ----- the parts -----
FAILED=()
has_part() { [[ ",$PARTS," == *",$1,"* ]]; }
run_part() {
  local part=$1; shift
  echo "== $part (${SECONDS} s in)"
  if ! "$PY" "$CHECKOUT/benchmarks/gpu_check.py" "$part" "$@" --out "$OUT/$part.json"; then
    echo "== $part failed"
    FAILED+=("$part")
  fi
}

DATASET=$WORK/data/pointmaze-large-stitch-v0-${DATASET_EPISODES}.npz
[[ $DRY == 1 ]] && DATASET=$WORK/data/pointmaze-large-stitch-v0-dry.npz
DATASET_PID=""
if has_part offline && [[ ! -f $DATASET ]]; then  # generated while the table runs (one CPU core)
  mkdir -p "$WORK/data"
  "$PY" -m l3p dataset pointmaze-large-stitch-v0 "${DATASET_ARGS[@]}" --out "$DATASET.tmp.npz" --no-progress \
    > "$WORK/dataset.log" 2>&1 && mv "$DATASET.tmp.npz" "$DATASET" &
  DATASET_PID=$!
fi

has_part table && run_part table --device "$DEVICE" "${TABLE_ARGS[@]}"

if has_part offline; then
  if [[ -n $DATASET_PID ]] && ! wait "$DATASET_PID"; then
    echo "== dataset generation failed:"; cat "$WORK/dataset.log"; FAILED+=(offline)
  else
    [[ -n $DATASET_PID ]] && cat "$WORK/dataset.log"
    rm -rf "$WORK/runs/offline"
    run_part offline --dataset "$DATASET" --steps "$OFFLINE_STEPS" --device "$DEVICE" --run-dir "$WORK/runs/offline" \
      "${OFFLINE_ARGS[@]}"
  fi
fi

if has_part push; then
  MINUTES=$PUSH_MINUTES
  if [[ -n $TIME_LIMIT ]]; then
    # What is left, less a margin for the workers' start, the last cycle, evaluation and the summary;
    # under a minute the run would show nothing.
    LEFT=$(( TIME_LIMIT - SECONDS - 60 ))
    MINUTES=$("$PY" -c "m = min($PUSH_MINUTES, $LEFT / 60); print(round(m, 2) if m >= 1 else 0)")
  fi
  if [[ $MINUTES == 0 ]]; then
    echo "== push skipped: less than a minute left within --time-limit $TIME_LIMIT"
    FAILED+=(push)
  else
    rm -rf "$WORK/runs/push"
    run_part push --minutes "$MINUTES" --run-dir "$WORK/runs/push" "${PUSH_ARGS[@]}"
  fi
fi

"$PY" "$CHECKOUT/benchmarks/gpu_check.py" summary --dir "$OUT"
echo "gpu_check: done in ${SECONDS} s; JSON in $OUT${FAILED:+; failed: ${FAILED[*]}}"
[[ ${#FAILED[@]} == 0 ]]

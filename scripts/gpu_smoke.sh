#!/usr/bin/env bash
# The one-GPU smoke test, on an offline machine with a CUDA PyTorch image (about 5 minutes on one H200):
# installs the wheels `python scripts/prepare_gpu_smoke.py` gathered into .gpu_smoke/ and this project into a
# scratch folder in front of the image's packages, then runs scripts/gpu_smoke.py: three GRPO steps of
# configs/gpu_single_vllm.yaml on CUDA in bf16 with HF generation, the reference snapshot swap, a checkpoint,
# and the adapter evaluated by `auditrl suite`, one line per check. Nothing is fetched.
#   bash scripts/gpu_smoke.sh [--out DIR] [gpu_smoke.py options]   (PYTHON=... names the interpreter with torch)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
OUT="runs/gpu-smoke"
if [[ "${1:-}" == "--out" && -n "${2:-}" ]]; then OUT="$2"; shift 2; fi
PREPARED=".gpu_smoke"
MODEL="$(ls "$PREPARED"/model/*.gguf 2>/dev/null | head -n 1 || true)"
if [[ -z "$MODEL" || ! -d "$PREPARED/wheels" ]]; then
  echo "FAIL prepared: $PREPARED/ is missing; run python scripts/prepare_gpu_smoke.py where the package index is reachable"
  exit 1
fi
SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT
started=$SECONDS
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$SITE/lib" "$PREPARED"/wheels/*.whl
"$PYTHON" -m pip wheel --quiet --no-index --no-deps --no-build-isolation --wheel-dir "$SITE/project" .
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target "$SITE/lib" "$SITE"/project/auditrl-*.whl
echo "PASS install: $(ls "$PREPARED"/wheels/*.whl | wc -l) wheels and auditrl into a scratch folder ($((SECONDS - started)) s)"
export PYTHONPATH="$SITE/lib${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
mkdir -p "$OUT"
"$PYTHON" scripts/gpu_smoke.py --model "$MODEL" --out "$OUT" "$@" 2> "$OUT/stderr.log"

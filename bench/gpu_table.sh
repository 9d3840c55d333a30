#!/usr/bin/env bash
# The generation table on a GPU (issue 56), for a session lent one through the device tool; never in CI.
#
#   bash bench/gpu_table.sh                     # GPT-2 shape, float32 then bfloat16, 3 rounds each
#   bash bench/gpu_table.sh --model smollm2     # any generate_speed.py argument is passed on
#
# Each dtype runs bench/generate_speed.py on CUDA with --compile and --fixed-shapes: every contender, and the
# two anchors, transformers' static cache (on CUDA its generate compiles the one-token call with CUDA graphs)
# and gpt-fast's recipe (the fast path's fixed-shape step compiled with mode="reduce-overhead": CUDA graphs).
# It needs torch with CUDA and transformers where it runs; nexttoken is read from lib/ (nothing installed).
# DEVICE=cpu runs the same commands on the CPU (how the tests check the script); PER_DTYPE_S bounds each run.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
export PYTHONPATH="$PWD/lib${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
fi
"$PYTHON" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__,
      "cuda", torch.cuda.is_available())' || exit 1
status=0
for dtype in float32 bfloat16; do
  echo "== $dtype on $DEVICE"
  timeout "${PER_DTYPE_S:-240}" "$PYTHON" bench/generate_speed.py --device "$DEVICE" --dtype "$dtype" \
    --compile --fixed-shapes --repeats 3 --no-ctranslate2 --no-llama-cpp "$@" || status=$?
done
exit "$status"

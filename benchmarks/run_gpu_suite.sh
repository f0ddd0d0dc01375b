#!/usr/bin/env bash
# What issue 29 measures on one CUDA GPU, each part under its own time limit, logs, JSON and profiles under $OUT
# (default ./gpu-results), packed at the end into $OUT/gpu-results.tgz (a device lease returns at most 8 files):
#   bash benchmarks/run_gpu_suite.sh [step|generate|tests|quickstart|all]    (default all: about 9.5 minutes)
# Wheels the GPU image lacks (trl, datasets, pydantic, math-verify, ...) are installed from ./.whl when that folder
# exists (docs/engines.md says how to fill it); nothing is downloaded.
set -o pipefail
part=${1:-all}
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 - <<'PY' 2>&1 | tee "$OUT/env.txt"
import importlib, torch
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "-")
for name in ("torch", "transformers", "triton", "trl", "datasets", "pyarrow", "accelerate", "peft", "pydantic"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as e:
        print(name, "missing:", e)
PY
status=0
# run NAME SECONDS COMMAND...: the part's output to the screen and $OUT/NAME.txt, stopped after SECONDS.
run() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  echo "=== $name (at most $limit s)"
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"
  local code=$?
  echo "=== $name: exit $code after $((SECONDS - start)) s" | tee -a "$OUT/times.txt"
  [ "$code" = 0 ] || status=1
}
if [ "$part" = step ] || [ "$part" = all ]; then
  # rlvr at 32-sequence micro-batches (with the resume check and a profiled fifth step), TRL, rlvr at 16 (the
  # first run's), rlvr at 32 with its update through compiled decoder layers (model.compile_layers)
  run gpu_step 300 python3 benchmarks/gpu_step.py --steps 4 --warmup 1 --micro-batch 32 16 --compile-training \
    --side-timeout 110 --profile "$OUT" --json "$OUT/gpu_step.json"
fi
if [ "$part" = generate ] || [ "$part" = all ]; then
  # the hf engine and transformers' dynamic-cache generate were measured once (docs/results.md): 5x slower, 70 s
  run gpu_generate 100 python3 benchmarks/gpu_generate.py --skip hf dynamic --json "$OUT/gpu_generate.json" \
    --profile "$OUT"
  run sampling_step 20 python3 benchmarks/sampling_step.py
fi
if [ "$part" = tests ] || [ "$part" = all ]; then
  run gpu_tests 60 python3 -m pytest -q -s -m gpu -p no:cacheprovider --continue-on-collection-errors tests
fi
if [ "$part" = quickstart ] || [ "$part" = all ]; then
  # 30 RL steps after the SFT (the whole quickstart's 500 did not fit in the first run's 55 s): the path on CUDA, end
  # to end; on the 2-core CPU the same command takes 40 s (38.5% -> 57.0% held out)
  run quickstart 90 python3 -m rlvr quickstart --output /tmp/rlvr-quickstart steps=30
  cp /tmp/rlvr-quickstart/summary.json /tmp/rlvr-quickstart/rl_curves.png "$OUT/" 2>/dev/null
fi
tar czf /tmp/gpu-results.tgz -C "$OUT" --exclude gpu-results.tgz . && mv /tmp/gpu-results.tgz "$OUT/"
exit $status

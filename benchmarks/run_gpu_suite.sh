#!/usr/bin/env bash
# Everything issue 14 measures on one CUDA GPU, writing logs and JSON under $OUT (default ./gpu-results).
#   bash benchmarks/run_gpu_suite.sh [tests|generate|step|quickstart|all]    (default all; each part < 10 min on an H100)
# Wheels the GPU image lacks (trl, datasets, dill, multiprocess, pydantic, ...) are installed from ./.whl when
# that folder exists (see docs/engines.md for how to fill it); nothing is downloaded.
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
run() { echo "=== $1"; shift; "$@" || status=1; }
if [ "$part" = tests ] || [ "$part" = all ]; then
  run "GPU tests" bash -c "python3 -m pytest -q -s -m gpu --continue-on-collection-errors -p no:cacheprovider tests 2>&1 | tee '$OUT/gpu_tests.txt'"
fi
if [ "$part" = generate ] || [ "$part" = all ]; then
  run "decode throughput" bash -c "python3 benchmarks/gpu_generate.py --json '$OUT/gpu_generate.json' --profile '$OUT' 2>&1 | tee '$OUT/gpu_generate.txt'"
fi
if [ "$part" = step ] || [ "$part" = all ]; then
  run "step time vs TRL" bash -c "python3 benchmarks/gpu_step.py --json '$OUT/gpu_step.json' 2>&1 | tee '$OUT/gpu_step.txt'"
fi
if [ "$part" = quickstart ] || [ "$part" = all ]; then
  run "quickstart on the GPU" bash -c "python3 -m rlvr quickstart --output /tmp/rlvr-quickstart 2>&1 | tail -n 40 | tee '$OUT/quickstart.txt'; cp /tmp/rlvr-quickstart/summary.json /tmp/rlvr-quickstart/rl_curves.png '$OUT/' 2>/dev/null"
fi
exit $status

#!/usr/bin/env bash
# What issue 29 measures on one CUDA GPU, in one device call: benchmarks/gpu_suite.py runs each part in its own
# process group under its own time limit (a hung part is killed whole and the next one runs), writes each part's log
# and JSON as it goes under $OUT (default ./gpu-results), ends with one line per part, and packs everything into
# $OUT/gpu-results.tgz (a device lease returns at most 8 files):
#   bash benchmarks/run_gpu_suite.sh [step generate sampling tests quickstart]      (default all: about 9.5 minutes)
#   bash benchmarks/run_gpu_suite.sh --cpu                                          (the rehearsal on a CPU)
# Wheels the GPU image lacks (trl, datasets, pydantic, math-verify, ...) are installed from ./.whl when that folder
# exists (docs/engines.md says how to fill it; they are built for the GPU image's Python 3.12); nothing is downloaded.
# The CPU rehearsal runs on this machine's own packages and leaves .whl alone.
set -o pipefail
OUT=${OUT:-gpu-results}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
if [[ " $* " != *" --cpu "* ]] && [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "could not install the wheels in .whl for $("$PY" -V 2>&1): refill .whl as docs/engines.md says" >&2; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
"$PY" - <<'PY' 2>&1 | tee "$OUT/env.txt"
import importlib, subprocess, torch
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "-")
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
print("commit", commit or "unknown (no git here: name it from the checkout that was copied)")
for name in ("torch", "transformers", "triton", "trl", "datasets", "pyarrow", "accelerate", "peft", "pydantic"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as e:
        print(name, "missing:", e)
PY
exec "$PY" benchmarks/gpu_suite.py --out "$OUT" "$@"

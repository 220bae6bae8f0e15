#!/usr/bin/env bash
# The GPU evidence for a lent GPU machine, in one batch that ends within ~9 minutes (nox,
# pytest-json-report and jsonschema carried as wheels in .whl/, see ../shared/tools/device-wheels.sh).
# Usage: bash scripts/gpu-check.sh OUTDIR     writes grade.log, validate.log, tests.log, batch.log
set -uo pipefail
out=${1:?usage: gpu-check.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TIMEFORMAT="wall: %R s"
log() { echo; echo "=== $* ==="; }
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
{
  log versions
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'x', torch.cuda.device_count())"
  log "nox -s grade -- --target solutions (cold Triton cache)"
  export TRITON_CACHE_DIR=$(mktemp -d)
  time nox -s grade -- --target solutions --report /tmp/score-solutions.json 2>&1 | tail -16
  log "python -m grader --target solutions (warm cache)"
  time python3 -m grader --target solutions --quiet --report /tmp/warm.json
  log "untouched skeletons (exercises/ as committed)"
  python3 -m grader --report /tmp/score-exercises.json 2>&1 | tail -12
  log "the chapter's own three kernels as a submission"
  mkdir -p /tmp/chapter && for f in grader/specs/*/gallery/chapter.py; do
    s=$(basename "$(dirname "$(dirname "$f")")"); cp "$f" "/tmp/chapter/$s.py"; done
  python3 -m grader --target /tmp/chapter --report /tmp/chapter.json 2>&1 | tail -12
  log "performance track: solutions, then untouched skeletons"
  time python3 -m grader --track performance --target solutions --report /tmp/score-perf.json 2>&1 | tail -14
  python3 -c "import json; print(json.dumps(json.load(open('/tmp/score-perf.json'))['performance'], indent=1))" | head -60
  python3 -m grader --track performance --report /tmp/perf-ex.json 2>&1 | tail -8
  log "the 07 showcase (Gluon) graded right or wrong by exercise 04's checks"
  mkdir -p /tmp/fa3 && cp solutions/07_fa3_attention.py "/tmp/fa3/$(python3 -c 'from kata.catalogue import find; print(find("04").filename)')"
  python3 -m grader 04 --target /tmp/fa3 --report /tmp/fa3.json 2>&1 | tail -12
  log "extensions track: solutions, then untouched skeletons"
  python3 -m grader --track extensions --target solutions --report /tmp/ext.json 2>&1 | tail -6
  python3 -m grader --track extensions --report /tmp/ext-ex.json 2>&1 | tail -6
} > "$out/grade.log" 2>&1
# Validation and the test suite side by side: their gradings share the GPU, nothing is timed.
( log "nox -s validate"; time timeout 330 nox -s validate -- --jobs 8 ) > "$out/validate.log" 2>&1 &
( log "pytest tests (compiled)"; time timeout 330 python3 -m pytest tests -q -p no:cacheprovider -x --timeout 300 2>&1 | tail -40 ) > "$out/tests.log" 2>&1 &
wait
if [ "$gpus" -ge 2 ]; then
  ( log "two GPUs: local batch engine, one student per GPU"; timeout 150 bash scripts/two-gpu-batch.sh /tmp/two-gpu-batch ) > "$out/batch.log" 2>&1
fi
for f in grade validate tests batch; do [ -f "$out/$f.log" ] && { echo "== $f"; tail -n 8 "$out/$f.log"; }; done

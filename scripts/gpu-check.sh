#!/usr/bin/env bash
# The GPU evidence for a lent GPU machine, in one batch (nox and pytest-json-report carried as
# wheels in .whl/, see ../shared/tools/device-wheels.sh). Writes a few logs into OUTDIR.
# Usage: bash scripts/gpu-check.sh OUTDIR
set -uo pipefail
out=${1:?usage: gpu-check.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TIMEFORMAT="wall: %R s"
log() { echo; echo "=== $* ==="; }
{
  log versions
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'x', torch.cuda.device_count())"
  log "worked examples"
  for f in solutions/0*.py; do python3 "$f"; echo "exit $?"; done
  log "nox -s grade -- --target solutions (cold Triton cache)"
  export TRITON_CACHE_DIR=$(mktemp -d)
  time nox -s grade -- --target solutions --report /tmp/score-solutions.json
  log "python -m grader --target solutions (warm cache)"
  time python3 -m grader --target solutions --quiet --report /tmp/warm.json
  log "nox -s grade (untouched exercises)"
  nox -s grade -- --report /tmp/score-exercises.json 2>&1 | tail -14
  log "performance track: solutions, then untouched skeletons"
  time python3 -m grader --track performance --target solutions --report /tmp/score-perf.json 2>&1 | tail -9
  python3 -c "import json; print(json.dumps(json.load(open('/tmp/score-perf.json'))['performance'], indent=1))"
  python3 -m grader --track performance --report /tmp/perf-ex.json 2>&1 | tail -8
} > "$out/grade.log" 2>&1
{
  log "nox -s validate"
  time nox -s validate
} > "$out/validate.log" 2>&1
{
  log "pytest tests (compiled)"
  python3 -m pytest tests -q -p no:cacheprovider 2>&1 | tail -25
} > "$out/tests.log" 2>&1
{
  log "nox -s batch (3 students)"
  rm -rf /tmp/subs /tmp/book && mkdir -p /tmp/subs/{ada,bob,cy}
  cp solutions/0*.py /tmp/subs/ada/; cp exercises/0*.py /tmp/subs/bob/
  cp solutions/01*.py solutions/03*.py exercises/02*.py /tmp/subs/cy/
  time nox -s batch -- --submissions /tmp/subs --out /tmp/book
  cat /tmp/book/gradebook.csv
  log "autograder bundle on CUDA"
  nox -s autograder -- --out /tmp/ag.zip && rm -rf /tmp/agr && mkdir -p /tmp/agr/source /tmp/agr/submission
  (cd /tmp/agr/source && python3 -m zipfile -e /tmp/ag.zip .) && cp solutions/0*.py /tmp/agr/submission/
  AUTOGRADER_ROOT=/tmp/agr bash /tmp/agr/source/run_autograder | tail -4
  python3 -c "import json; r=json.load(open('/tmp/agr/results/results.json')); print('results.json score', r['score'], len(r['tests']), 'tests;', r['output'])"
} > "$out/batch.log" 2>&1
{
  log "nox -s bench"
  nox -s bench -- --no-grader 2>&1 | grep -v "^nox >"
  cp reports/bench.json reports/bench.png "$out/" 2>/dev/null
} > "$out/bench.log" 2>&1
for f in grade validate tests batch bench; do echo "== $f"; tail -n 6 "$out/$f.log"; done

#!/usr/bin/env bash
# The GPU evidence for a lent GPU machine, in one batch that ends within ~9 minutes (pytest-json-report,
# pytest-xdist and jsonschema carried as wheels in .whl/, see ../shared/tools/device-wheels.sh).
# Usage: bash scripts/gpu-check.sh OUTDIR
# writes grade.log (gradings, timed), validate.log, mutants.log (+ mutants.md), tests.log
set -uo pipefail
out=${1:?usage: gpu-check.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TIMEFORMAT="wall: %R s"
log() { echo; echo "=== $* ==="; }
jobs=$(( $(nproc) * 3 / 4 ))
{
  log versions
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'x', torch.cuda.device_count())"
  log "python -m grader --target solutions (cold Triton cache)"
  export TRITON_CACHE_DIR=$(mktemp -d)
  time python3 -m grader --target solutions --report /tmp/score-solutions.json 2>&1 | tail -8
  log "python -m grader --target solutions (warm cache)"
  time python3 -m grader --target solutions --quiet --report /tmp/warm.json
  log "untouched skeletons"
  python3 -m grader --target "$(mktemp -d)" --report /tmp/none.json --quiet 2>&1 | tail -2
  mkdir -p /tmp/sk && python3 -c "
from kata import catalogue, skeletons
for ex in catalogue.ALL_EXERCISES:
    open('/tmp/sk/' + ex.filename, 'w').write(skeletons.pristine(ex.stem).text)"
  python3 -m grader --target /tmp/sk --report /tmp/score-exercises.json 2>&1 | tail -10
  log "the chapter's own three kernels as a submission"
  mkdir -p /tmp/chapter && for f in grader/specs/*/gallery/chapter.py; do
    s=$(basename "$(dirname "$(dirname "$f")")"); cp "$f" "/tmp/chapter/$s.py"; done
  python3 -m grader --target /tmp/chapter --report /tmp/chapter.json 2>&1 | grep -v "^  PASS" | tail -24
  log "performance track: solutions (timed), then untouched skeletons"
  time python3 -m grader --track performance --target solutions --report /tmp/score-perf.json 2>&1 | tail -14
  python3 -m grader --track performance --target /tmp/sk --report /tmp/perf-ex.json 2>&1 | tail -6
  log "the 07 showcase (Gluon) as a 04 submission: it runs only its own tiles, so the pinned pointer-load cases fail"
  mkdir -p /tmp/fa3 && cp solutions/07_fa3_attention.py "/tmp/fa3/$(python3 -c 'from kata.catalogue import find; print(find("04").filename)')"
  python3 -m grader 04 --target /tmp/fa3 --report /tmp/fa3.json 2>&1 | tail -8
  log "07's own checks: its persistent grid bit for bit against its tile grid, into NaN"
  python3 scripts/fa3_persistent.py --check-only --out "$out/fa3" 2>&1 | grep -v "^check " | tail -4
  grep -c '"equal_to_tile_grid": true' "$out/fa3/fa3_persistent.json"
  log "extensions track: solutions, then untouched skeletons"
  python3 -m grader --track extensions --target solutions --report /tmp/ext.json 2>&1 | tail -4
  python3 -m grader --track extensions --target /tmp/sk --report /tmp/ext-ex.json 2>&1 | tail -4
} > "$out/grade.log" 2>&1
# Validation, mutants and the test suite side by side: they share the GPU, nothing is timed.
( log "validate"; time timeout 400 python3 -m grader.validate --jobs "$jobs" ) > "$out/validate.log" 2>&1 &
( log "mutants"; time timeout 400 python3 -m grader.validate.mutants --jobs "$jobs" --summary; cp docs/mutants.md "$out/" ) > "$out/mutants.log" 2>&1 &
( log "pytest tests (compiled)"; time PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout 400 python3 -m pytest -p xdist.plugin -n 6 --dist loadfile -m "not e2e" tests -q -p no:cacheprovider 2>&1 | tail -40 ) > "$out/tests.log" 2>&1 &
wait
for f in grade validate mutants tests; do [ -f "$out/$f.log" ] && { echo "== $f"; tail -n 6 "$out/$f.log"; }; done

#!/usr/bin/env bash
# One batch of GPU evidence for a lent GPU machine: versions, worked examples, grading of
# solutions/ and exercises/ with a cold Triton cache, and the kernel tests compiled.
# Usage: bash scripts/gpu-smoke.sh OUTDIR
set -uo pipefail
out=${1:-/tmp/gpu-smoke}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$(mktemp -d)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
} 2>&1 | tee "$out/versions.txt"
for f in solutions/0*.py; do python3 "$f"; echo "exit $?"; done 2>&1 | tee "$out/examples.txt"
/usr/bin/time -f "grade solutions (cold cache): %e s" python3 -m grader --target solutions --report "$out/solutions.json" 2>&1 | tee "$out/grade-solutions.txt"
/usr/bin/time -f "grade solutions (warm cache): %e s" python3 -m grader --target solutions --report "$out/solutions-warm.json" --quiet 2>&1 | tee -a "$out/grade-solutions.txt"
python3 -m grader --report "$out/exercises.json" 2>&1 | tail -3 | tee "$out/grade-exercises.txt"
if [ -d tests ] && ls tests/test_*.py >/dev/null 2>&1; then
  python3 -m pytest tests -q -x -m "not slow" -p no:cacheprovider 2>&1 | tail -15 | tee "$out/tests.txt"
fi

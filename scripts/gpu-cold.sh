#!/usr/bin/env bash
# Cold and warm gradings of the solutions on a GPU machine, with and without parallel compiles,
# and what the grading process spends before it grades. Usage: bash scripts/gpu-cold.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 TIMEFORMAT="wall: %R s"
python3 -c "
import time; t = time.time(); from kata import runtime; runtime.configure(); a = time.time()
d = runtime.describe(); b = time.time()
print(f'runtime configure {a - t:.2f} s, describe {b - a:.2f} s: {d}')"
for threads in 0 8; do
  echo "== cold, KATA_COMPILE_THREADS=$threads"
  export TRITON_CACHE_DIR=$(mktemp -d) KATA_COMPILE_THREADS=$threads
  time python3 -m grader --target solutions --quiet --report /tmp/cold-$threads.json
  python3 -c "import json; r = json.load(open('/tmp/cold-$threads.json')); print(r['duration_s'], [(e['id'][:2], e['duration_s']) for e in r['exercises']])"
done
echo "== warm, KATA_COMPILE_THREADS=8"
time python3 -m grader --target solutions --quiet --report /tmp/warm.json

#!/usr/bin/env bash
# Batch grading on a machine with 2 GPUs, local engine: one worker per GPU, each pinned with
# CUDA_VISIBLE_DEVICES. Grades 4 students and prints, per student, the GPU its grader saw and
# when it ran (from OUT/<student>/task.json), then the Slurm engine's GPU request for the same
# class (an emitted sbatch script: nothing is submitted, no Slurm needed).
# Usage: bash scripts/two-gpu-batch.sh [OUTDIR]   (python3 with torch, triton, numpy, pytest,
# pytest-json-report; no nox, no submitit)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/two-gpu-batch}
export PYTHONUNBUFFERED=1 TIMEFORMAT="wall: %R s"
rm -rf "$out" && mkdir -p "$out"/subs/{ada,bob,cy,dee}
cp solutions/0[123]_*.py "$out/subs/ada/"                                  # 100
cp exercises/0[123]_*.py "$out/subs/bob/"                                  # 0, four traps
cp solutions/01_*.py solutions/03_*.py exercises/02_*.py "$out/subs/cy/"   # 75
cp solutions/0[123]_*.py "$out/subs/dee/"                                  # 100
echo "=== GPUs"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader || echo "(no nvidia-smi)"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'GPUs seen by torch:', torch.cuda.device_count())"
echo "=== python -m grader.classroom.batch --engine local (4 students)"
time python3 -m grader.classroom.batch --engine local --submissions "$out/subs" --out "$out/book"
echo "=== per student: the GPU it was pinned to, and when it ran"
python3 - "$out/book" <<'PY'
import json, pathlib, sys
for d in sorted(p for p in pathlib.Path(sys.argv[1]).iterdir() if p.is_dir() and p.name[0] != "."):
    t = json.loads((d / "task.json").read_text())
    print(f"{d.name:4} CUDA_VISIBLE_DEVICES={t['cuda_visible_devices']}  {t['status']} "
          f"{t.get('score')}/{t.get('max_score')}  {t['started'][11:19]} -> {t['finished'][11:19]}"
          f"  ({t.get('duration_s')} s)  host {t['host']}")
PY
head -qn1 "$out"/book/*/grader.log
cat "$out/book/gradebook.csv"
echo "=== the Slurm engine's request per student for the same class (--emit-sbatch, not submitted)"
python3 -m grader.classroom.batch --submissions "$out/subs" --out "$out/sbatch-out" --emit-sbatch "$out/grade.sbatch" >/dev/null
grep '^#SBATCH' "$out/grade.sbatch"

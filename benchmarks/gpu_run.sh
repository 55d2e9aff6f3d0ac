#!/usr/bin/env bash
# What this project runs on a GPU, in few calls (the device machine has torch, triton, hypothesis,
# pytest, xdist, jinja2, matplotlib and scipy, and no network). Writes under $OUT (default ./out).
#   bash benchmarks/gpu_run.sh report   nightly job (benchmarks, baselines, reports), A/B gate, perf gate
#   bash benchmarks/gpu_run.sh verify   pytest -n auto with the nightly profile, faults included
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT"
log="$OUT/log_$1.txt"
{
  nvidia-smi -L
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  date -u
} > "$log" 2>&1
case "$1" in
  report)
    timeout 380 python3 -m harness nightly --out "$OUT/nightly" --profile ci --max-examples 3 --update-baseline >> "$log" 2>&1
    echo "nightly rc=$?" >> "$log"
    rm -f "$OUT/nightly/history.jsonl"  # one line, derivable from results.json; record baselines here with
    # harness record-baseline OUT/nightly/results.json (the device tool returns no file names with '+')
    timeout 80 python3 benchmarks/ab_gate.py "$OUT/ab_gate.json" >> "$log" 2>&1
    echo "ab_gate rc=$?" >> "$log"
    timeout 100 python3 -m pytest -m perf -p no:xdist -q tests/test_perf.py >> "$log" 2>&1
    echo "perf gate rc=$?" >> "$log"
    ;;
  verify)
    HARNESS_PROFILE=nightly timeout 220 python3 -m pytest -n 16 -q tests/test_kernels.py tests/test_faults.py >> "$log" 2>&1
    echo "pytest rc=$?" >> "$log"
    # failing cases write repro scripts as they happen: bring them back even when the run is cut off
    [ -d .harness/repros ] && tar czf "$OUT/repros.tgz" .harness/repros
    timeout 110 python3 -m harness nightly --out "$OUT/nightly" --profile ci --max-examples 1 --quick --update-baseline >> "$log" 2>&1
    echo "nightly rc=$?" >> "$log"
    rm -f "$OUT/nightly/history.jsonl"
    ;;
esac
tail -n 60 "$log"

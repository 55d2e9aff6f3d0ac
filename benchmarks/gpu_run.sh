#!/usr/bin/env bash
# What this project runs on a GPU machine, in few calls. The machine needs torch, triton,
# hypothesis, pytest, pytest-xdist, jinja2, matplotlib (and scipy); no network. Writes under $OUT
# (default ./out), one log per mode. PROFILE (default nightly) picks the verification profile.
#
#   bash benchmarks/gpu_run.sh verify [PYTEST ARGS]   pytest -n JOBS (16) with the nightly profile, faults included
#                                                     (TESTS overrides the test files)
#   bash benchmarks/gpu_run.sh verify-shards         each test of TESTS (or, with CASE and CHECKS, harness/kernel_tests.py's
#                                                     test_kernel[CASE-CHECK] for each CHECK, CASE as
#                                                     SPEC-IMPLEMENTATION-DTYPE) as SHARDS (8) pytest processes side by side, each
#                                                     drawing EXAMPLES (150) / SHARDS examples from its own seed
#                                                     (HARNESS_SEED = shard number + SEED_BASE): the nightly count for a
#                                                     property that compiles too many variants to finish in one process;
#                                                     the log ends with each failing shard's last lines, the shards'
#                                                     outputs go into $OUT/shards.tgz
#   bash benchmarks/gpu_run.sh verify-each KERNEL...  the same, one pytest per kernel with its own time limit
#                                                     (STEP_TIMEOUT each), so one slow kernel cannot hide the rest
#   bash benchmarks/gpu_run.sh bench NAME KERNEL...   harness nightly (ci-profile smoke verification in JOBS
#                                                     workers for VERIFY_BUDGET s, the benchmark sweep for
#                                                     BENCH_BUDGET s, baselines) into $OUT/NAME, archived as
#                                                     $OUT/NAME.tgz; the log ends with the summary's
#                                                     regressions and improvements; add --quick after the
#                                                     kernels for the quick shapes only
#   bash benchmarks/gpu_run.sh compiled [--quick]     benchmarks/compiled_block.py: our ops inside torch.compile and CUDA
#                                                     graphs against compile's fusion of the eager ops, into $OUT/compiled
#   bash benchmarks/gpu_run.sh gate                   the regression gate's A/B run, then pytest -m perf
#   bash benchmarks/gpu_run.sh tune [KERNEL...]       the row kernels' tiling sweep (softmax, layer_norm,
#                                                     rms_norm; STEP_TIMEOUT each)
#   bash benchmarks/gpu_run.sh spread                 pytest -n 4 (ci profile) on every visible GPU: the
#                                                     log's device summary shows the workers' spread
#   bash benchmarks/gpu_run.sh sanitize [REPRO...]    each repro script (default: those under .harness/repros
#                                                     that report a CUDA error) under compute-sanitizer's
#                                                     memcheck, one report each in $OUT/sanitizer/ (STEP_TIMEOUT each)
# HARNESS_COMMIT, where the caller sets it, names the code in harness nightly's results (a copied
# tree's .git may be stale). Time limits per step keep each call inside the device's 10-minute
# command limit: override with
# STEP_TIMEOUT. Failing cases write repro scripts to .harness/repros; verify brings them back as
# $OUT/repros.tgz even when the run is cut off.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# pytest loads the harness's plugin through its entry point where the harness is installed; a
# checkout run from PYTHONPATH (a GPU machine with no network) names it
python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.value == 'harness.pytest_plugin' for e in m.entry_points(group='pytest11')))" \
  || export PYTEST_PLUGINS=harness.pytest_plugin
mkdir -p "$OUT"
mode=$1
shift
log="$OUT/log_$mode.txt"
[ "$mode" = bench ] && log="$OUT/log_bench_$1.txt"
{
  nvidia-smi -L
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  date -u
} > "$log" 2>&1
# Verification runs check every bound launch against the specialisation it was built for
# (kernels/_launch.py, Kernel.bind); benchmark runs do not pay for the check.
case "$mode" in verify*) export HARNESS_CHECK_LAUNCH=${HARNESS_CHECK_LAUNCH:-1} ;; esac
case "$mode" in
  verify)
    # -v: one PASSED/FAILED line per test as it ends, so a run cut off by its limit still says
    # which tests passed; SIGINT (not TERM) lets pytest print its summary and durations then.
    HARNESS_PROFILE=${PROFILE:-nightly} timeout -s INT -k 30 "${STEP_TIMEOUT:-540}" python3 -m pytest -n "${JOBS:-16}" -v -p no:cacheprovider -p no:benchmark \
      --durations=20 ${TESTS:-harness/kernel_tests.py tests/test_faults.py} "$@" >> "$log" 2>&1
    echo "pytest rc=$?" >> "$log"
    [ -d .harness/repros ] && tar czf "$OUT/repros.tgz" .harness/repros
    ;;
  verify-shards)
    shards=${SHARDS:-8}
    per_shard=$(( (${EXAMPLES:-150} + shards - 1) / shards ))
    mkdir -p "$OUT/shards"
    echo "${SHARDS:-8} shards of $per_shard examples per test" >> "$log"
    if [ -n "${CASE:-}" ]; then
      TESTS=$(for check in ${CHECKS:?CASE needs CHECKS}; do echo -n "harness/kernel_tests.py::test_kernel[$CASE-$check] "; done)
    fi
    tests=(${TESTS:?verify-shards needs TESTS, or CASE and CHECKS})
    # the processes side by side share the cores for torch's host threads (harness.device.share_cpu)
    export HARNESS_PROCESSES=$(( ${#tests[@]} * shards ))
    for test in "${tests[@]}"; do
      name=$(echo "$test" | sed 's/.*\[\(.*\)\]/\1/; s/[^A-Za-z0-9_.-]/_/g')
      for shard in $(seq 1 "$shards"); do
        file="$OUT/shards/$name-$shard.txt"
        ( HARNESS_PROFILE=${PROFILE:-nightly} HARNESS_SEED=$(( shard + ${SEED_BASE:-0} )) HARNESS_MAX_EXAMPLES=$per_shard \
            timeout -s INT -k 30 "${STEP_TIMEOUT:-540}" python3 -m pytest -p no:xdist -p no:cacheprovider -p no:benchmark -q \
            "$test" > "$file" 2>&1
          echo "shard rc=$?" >> "$file" ) &
      done
    done
    wait
    for file in "$OUT"/shards/*.txt; do  # pytest's summary line, or how the shard ended without one
      echo "$(basename "$file" .txt): $(grep -E '[0-9]+ (passed|failed|error)' "$file" | tail -1) $(tail -1 "$file")" >> "$log"
    done
    for file in "$OUT"/shards/*.txt; do  # what each shard that did not pass printed last
      grep -q "1 passed" "$file" || { echo "== $(basename "$file")"; tail -n 30 "$file"; } >> "$log"
    done
    # one archive: the device tool brings back only a few files a call
    tar czf "$OUT/shards.tgz" -C "$OUT" shards && rm -r "$OUT/shards"
    [ -d .harness/repros ] && tar czf "$OUT/repros.tgz" .harness/repros
    ;;
  verify-each)
    for kernel in "$@"; do
      echo "== $kernel" >> "$log"
      HARNESS_PROFILE=${PROFILE:-nightly} timeout "${STEP_TIMEOUT:-150}" python3 -m pytest -n 16 -q -p no:cacheprovider -p no:benchmark \
        --durations=5 harness/kernel_tests.py --kernels "$kernel" >> "$log" 2>&1
      echo "pytest $kernel rc=$?" >> "$log"
    done
    [ -d .harness/repros ] && tar czf "$OUT/repros.tgz" .harness/repros
    ;;
  compiled)
    timeout "${STEP_TIMEOUT:-540}" python3 benchmarks/compiled_block.py "$OUT/compiled" "$@" >> "$log" 2>&1
    echo "compiled_block rc=$?" >> "$log"
    ;;
  bench)
    name=$1
    shift
    timeout "${STEP_TIMEOUT:-540}" python3 -m harness nightly --out "$OUT/$name" --profile ci --max-examples 2 \
      --jobs "${JOBS:-16}" --verify-budget "${VERIFY_BUDGET:-120}" --bench-budget "${BENCH_BUDGET:-300}" \
      --update-baseline --shard "$name" "$@" >> "$log" 2>&1
    echo "nightly rc=$?" >> "$log"
    grep -E "regression|improvement" "$OUT/$name/summary.md" >> "$log" 2>/dev/null
    # the device tool returns no file names with '+' and only a few files a call: record baselines
    # from the archive's results.json with harness record-baseline NAME/results.json; the history
    # has one line, derivable from it
    rm -f "$OUT/$name/history.jsonl"
    [ -d "$OUT/$name" ] && tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -r "$OUT/$name"
    ;;
  gate)
    timeout 240 python3 benchmarks/ab_gate.py "$OUT/ab_gate.json" >> "$log" 2>&1
    echo "ab_gate rc=$?" >> "$log"
    timeout "${STEP_TIMEOUT:-300}" python3 -m pytest -m perf -p no:xdist -p no:benchmark -q tests/test_perf.py >> "$log" 2>&1
    echo "perf gate rc=$?" >> "$log"
    ;;
  tune)
    # one process per kernel family, each with its own limit, so one slow sweep cannot hide the rest
    for target in ${@:-softmax layer_norm rms_norm}; do
      timeout "${STEP_TIMEOUT:-180}" python3 benchmarks/tune_rows.py "$OUT/tune_$target.json" $target >> "$log" 2>&1
      echo "tune $target rc=$?" >> "$log"
    done
    ;;
  spread)
    timeout "${STEP_TIMEOUT:-300}" python3 -m pytest -n 4 -q -p no:cacheprovider -p no:benchmark harness/kernel_tests.py "$@" >> "$log" 2>&1
    echo "pytest rc=$?" >> "$log"
    ;;
  sanitize)
    # An illegal memory access says nothing of where; memcheck names the kernel, the source line and
    # the address (it found attention's out-of-bounds shared read on the H100). Repro scripts from a
    # verify call come back in repros.tgz: unpack it at the repository root first.
    sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
    if [ -z "$sanitizer" ]; then
      echo "no compute-sanitizer on this machine" >> "$log"
      exit 1
    fi
    scripts=("$@")
    if [ ${#scripts[@]} -eq 0 ]; then
      mapfile -t scripts < <(grep -l "CUDA error" .harness/repros/*.py 2>/dev/null)
    fi
    mkdir -p "$OUT/sanitizer"
    for script in "${scripts[@]}"; do
      report="$OUT/sanitizer/$(basename "$script" .py).txt"
      timeout "${STEP_TIMEOUT:-150}" "$sanitizer" --tool memcheck --print-limit 10 python3 "$script" > "$report" 2>&1
      echo "$script: rc=$? $(grep -m1 -E 'Invalid|ERROR SUMMARY' "$report")" >> "$log"
    done
    [ ${#scripts[@]} -eq 0 ] && echo "no repro script to sanitize" >> "$log"
    ;;
  *)
    echo "unknown mode $mode (verify, verify-shards, verify-each, bench, gate, tune, spread, sanitize)" >&2
    exit 2
    ;;
esac
tail -n 40 "$log"

#!/usr/bin/env bash
# The nccl backend on a GPU machine, in one command, without Bazel: runs the binaries
# tools/stage_gpu_bins.sh staged in .device_bin/ -- the nccl test suites, then a 2-rank
# all_reduce bandwidth sweep in nccl-tests' columns (algbw, busbw). Under 8 minutes on
# one GPU: every suite has its own timeout, and none may run past the overall budget.
#
# NCCL refuses two ranks on one GPU; here the suites put up to 3 ranks on a GPU when
# there are fewer GPUs than ranks (DISTCOMM_TEST_SHARE_GPU=1, the default here: each rank
# poses as its own host through NCCL_HOSTID and the ranks talk over sockets on lo). Set
# DISTCOMM_TEST_SHARE_GPU=0 to run only one rank per GPU; GPUs in exclusive-process mode
# cannot be shared, and the check says so.
#
# Prints, per suite, the cases that ran, passed, failed and were skipped, and why they
# were skipped. Fails when a suite fails or times out, when the probe finds no usable GPU
# although nvidia-smi lists one, and when no GPU case ran at all.
#
#   tools/gpu_check.sh [suite ...]     (default: all; names as in SUITES below)
#   GPU_CHECK_LOGS=dir                  also leaves every suite's full log there (one .tgz)
#
# libnccl.so.2 comes from $NCCL_LIB_DIR, the CUDA toolkit, or the nvidia-nccl-cu13 Python
# package; the CUDA runtime was staged with the binaries; the driver is the machine's.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/.device_bin"
[[ -d "$BIN/bin" ]] || { echo "gpu_check: $BIN is missing: run tools/stage_gpu_bins.sh on a build machine first"; exit 2; }

# suite:timeout in seconds (the overall budget caps them further).
SUITES=(nccl_plugin_test:20 nccl_init_test:20 nccl_cuda_streams_test:45 nccl_cuda_lifecycle_test:45
        nccl_cuda_p2p_test:45 nccl_cuda_subgroup_test:60 nccl_cuda_failure_test:90 nccl_mixed_group_test:45 bandwidth:45
        nccl_cuda_ops_test:120 nccl_conformance_test:90)
BUDGET=${GPU_CHECK_BUDGET_S:-470}
# Suites about the machine without a GPU (they mostly skip here): not counted as GPU cases.
HOST_SUITES=" nccl_plugin_test nccl_init_test "

# Prints the folder holding libnccl.so.2.
find_nccl() {
  local d
  for d in ${NCCL_LIB_DIR:-} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/lib/x86_64-linux-gnu; do
    [[ -n "$d" && -e "$d/libnccl.so.2" ]] && { echo "$d"; return 0; }
  done
  # nvidia-nccl-cu13 puts it under the "nvidia" namespace package of some site-packages.
  local py roots
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    roots=$("$py" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null) || continue
    d=$(printf '%s\n' "$roots" | while read -r r; do find "$r" -maxdepth 4 -name libnccl.so.2; done | head -n 1)
    [[ -n "$d" ]] && { dirname "$d"; return 0; }
  done
  return 1
}

NCCL_DIR=$(find_nccl) || { echo "gpu_check: libnccl.so.2 not found (set NCCL_LIB_DIR, or pip install nvidia-nccl-cu13)"; exit 2; }
export LD_LIBRARY_PATH="$BIN/lib:$NCCL_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DISTCOMM_PLUGIN_PATH="$BIN/lib"
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export DISTCOMM_TEST_SHARE_GPU=${DISTCOMM_TEST_SHARE_GPU:-1}
TEST_TMPDIR=$(mktemp -d)
export TEST_TMPDIR
keep_logs() {
  [[ -n "${GPU_CHECK_LOGS:-}" ]] && (cd "$TEST_TMPDIR" && tar czf "$GPU_CHECK_LOGS/gpu_check_logs.tgz" ./*.log)
  rm -rf "$TEST_TMPDIR"
}
trap keep_logs EXIT

echo "=== machine"
listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
echo "libnccl.so.2 from $NCCL_DIR"
"$BIN/bin/gpu_probe"
probe=$?
if ((probe != 0)); then
  if ((listed > 0)); then
    echo "gpu_check: FAILED: nvidia-smi lists $listed GPU(s) but CUDA sees none usable (see the probe above)"
  else
    echo "gpu_check: FAILED: no GPU on this machine"
  fi
  exit 1
fi
if [[ "$DISTCOMM_TEST_SHARE_GPU" == 1 ]] && nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null |
     grep -qi exclusive; then
  echo "gpu_check: a GPU is in exclusive-process mode: ranks cannot share it (DISTCOMM_TEST_SHARE_GPU=0)"
  export DISTCOMM_TEST_SHARE_GPU=0
fi
echo "DISTCOMM_TEST_SHARE_GPU=$DISTCOMM_TEST_SHARE_GPU NCCL_DEBUG=$NCCL_DEBUG budget ${BUDGET}s"

# Runs one gtest suite; prints its failures, skip reasons and a count line; sets $ran.
run_suite() {
  local name=$1 limit=$2 log="$TEST_TMPDIR/$1.log"
  timeout -k 10 "$limit" "$BIN/bin/$name" --gtest_brief=1 >"$log" 2>&1
  local rc=$?
  show "$log"
  local total passed skipped failed
  total=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$log" | tail -n 1)
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n 1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}.*/\1/p' "$log" | tail -n 1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -n 1)
  if [[ -z "$total" ]]; then
    ((rc == 124 || rc == 137)) && echo "--- $name: TIMED OUT after ${limit}s" || echo "--- $name: ended without a summary (exit $rc)"
    ran=0
    return 1
  fi
  ran=$((total - ${skipped:-0}))
  echo "--- $name: $ran ran (${passed:-0} passed, ${failed:-0} failed), ${skipped:-0} skipped, $((SECONDS - suite_start))s"
  skip_reasons "$log" | sort | uniq -c | sed 's/^ */      skipped: /'
  ((rc == 0))
}

# A suite's log without the lines of passing and skipped cases (reasons come once, counted,
# below); a long one is cut in the middle.
show() {
  local shown="$1.shown" lines
  grep -v -e '^\[ *\(RUN\|OK\) *\]' -e ': Skipped$' "$1" | grep -v -F -f <(skip_reasons "$1") >"$shown"
  lines=$(wc -l <"$shown")
  if ((lines <= 200)); then
    cat "$shown"
  else
    head -n 120 "$shown"
    echo "... $((lines - 180)) lines left out (GPU_CHECK_LOGS=dir keeps them) ..."
    tail -n 60 "$shown"
  fi
}

# The message under each "file:line: Skipped" line of a gtest log.
skip_reasons() { awk 'prev ~ /: Skipped$/ { print } { prev = $0 }' "$1"; }

# The 2-rank all_reduce sweep; counts as one case.
run_bandwidth() {
  local limit=$1
  timeout -k 10 "$limit" "$BIN/bin/nccl_all_reduce_bandwidth" --nproc 2 --min_bytes 1024 \
    --max_bytes $((256 << 20)) --iters 20 --warmup 5 2>&1 | tee "$TEST_TMPDIR/bandwidth.log"
  local rc=${PIPESTATUS[0]}
  ((rc == 124 || rc == 137)) && echo "--- bandwidth: TIMED OUT after ${limit}s"
  ran=$((rc == 0 ? 1 : 0))
  echo "--- bandwidth: exit $rc, $((SECONDS - suite_start))s"
  ((rc == 0))
}

wanted=("$@")
failed=()
gpu_ran=0
start=$SECONDS
for entry in "${SUITES[@]}"; do
  name=${entry%%:*}
  limit=${entry##*:}
  if ((${#wanted[@]})) && [[ " ${wanted[*]} " != *" $name "* ]]; then continue; fi
  left=$((BUDGET - (SECONDS - start)))
  if ((left < 15)); then
    echo "=== $name: not run, the ${BUDGET}s budget is spent"
    failed+=("$name(not run)")
    continue
  fi
  ((limit > left)) && limit=$left
  echo "=== $name (up to ${limit}s)"
  suite_start=$SECONDS
  ran=0
  if [[ $name == bandwidth ]]; then run_bandwidth "$limit"; else run_suite "$name" "$limit"; fi || failed+=("$name")
  [[ $HOST_SUITES == *" $name "* ]] || gpu_ran=$((gpu_ran + ran))
done

echo "=== gpu_check: $((SECONDS - start)) s, $gpu_ran GPU case(s) ran"
if ((gpu_ran == 0)); then
  echo "gpu_check: FAILED: no GPU case ran (every one skipped: see the reasons above)"
  exit 1
fi
if ((${#failed[@]})); then
  echo "gpu_check: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu_check: all passed"

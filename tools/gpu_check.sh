#!/usr/bin/env bash
# The nccl backend on a GPU machine, in one command, without Bazel: runs what
# tools/stage_gpu_bins.sh staged in .device_bin/ -- the nccl test suites, most informative
# first (every op, the conformance sweep), then the rest, then a 2-rank all_reduce baseline:
# distcomm against NCCL alone at the same sizes. Made for a machine lent for ~15 minutes in
# all, start-up included: the whole run has a budget (GPU_CHECK_BUDGET_S, default 330 s,
# under 6 minutes) that leaves time for one rerun; each suite has its own timeout too.
#
# DISTCOMM_REQUIRE=cuda is set: a case that would skip for want of a GPU fails instead, so
# a machine with a GPU cannot pass by skipping. NCCL refuses two ranks on one GPU; here the
# suites put up to 3 ranks on a GPU when there are fewer GPUs than ranks
# (DISTCOMM_TEST_SHARE_GPU=1, the default here: each rank poses as its own host through
# NCCL_HOSTID and the ranks talk over sockets on lo). Set DISTCOMM_TEST_SHARE_GPU=0 to run
# only one rank per GPU; GPUs in exclusive-process mode cannot be shared, and it says so.
#
# Prints the NCCL version the binaries were built against and the one found here, per
# suite the cases that ran, passed, failed and were skipped (and why), and the baseline's
# ratio per size and its 8 B latency. Fails when there is no GPU, when a suite fails, times
# out or is left out for want of budget, when the probe finds no usable GPU although
# nvidia-smi lists one, and when no GPU case ran at all.
#
#   tools/gpu_check.sh [suite ...]     (default: all; names as in SUITES below, "baseline")
#   GPU_CHECK_LOGS=dir                  where every suite's full log goes (default: a new
#                                       folder under /tmp, named at the end)
#
# libnccl.so.2 comes from $NCCL_LIB_DIR, the CUDA toolkit, or the nvidia-nccl-cu13 Python
# package; the CUDA runtime was staged with the binaries; the driver is the machine's.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/.device_bin"
BUDGET=${GPU_CHECK_BUDGET_S:-330}

# suite:timeout in seconds, in the order they run (the budget caps them further).
SUITES=(nccl_cuda_ops_test:90 nccl_conformance_test:90 nccl_cuda_streams_test:30 nccl_cuda_p2p_test:90
        nccl_cuda_failure_test:75 nccl_cuda_lifecycle_test:30 nccl_cuda_subgroup_test:45 nccl_mixed_group_test:20
        nccl_plugin_test:10 nccl_init_test:15 baseline:60)
# Suites about the machine without a GPU (they mostly skip here): not counted as GPU cases.
HOST_SUITES=" nccl_plugin_test nccl_init_test "
# The baseline: ranks, sizes (x4 steps from 8 B), iterations; the same for both programs.
BASELINE_RANKS=2
BASELINE_ARGS=(--nproc "$BASELINE_RANKS" --min_bytes 8 --max_bytes $((32 << 20)) --iters 20 --warmup 5)

echo "=== machine"
listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
if ((listed == 0)) && ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
  echo "gpu_check: FAILED: no GPU on this machine (nvidia-smi lists none and there is no /dev/nvidia<N>)"
  exit 1
fi
[[ -d "$BIN/bin" ]] || { echo "gpu_check: $BIN is missing: run tools/stage_gpu_bins.sh on a build machine first"; exit 2; }
LOGS=${GPU_CHECK_LOGS:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$LOGS" || { echo "gpu_check: cannot make the log folder $LOGS"; exit 2; }
LOGS=$(cd "$LOGS" && pwd)

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
export DISTCOMM_REQUIRE="${DISTCOMM_REQUIRE:+$DISTCOMM_REQUIRE,}cuda"
export TEST_TMPDIR="$LOGS/tmp"
mkdir -p "$TEST_TMPDIR"

echo "libnccl.so.2 from $NCCL_DIR"
[[ -f "$BIN/BUILD_INFO" ]] && sed 's/^/staged: /' "$BIN/BUILD_INFO"
"$BIN/bin/gpu_probe" | tee "$LOGS/gpu_probe.log"
probe=${PIPESTATUS[0]}
if ((probe != 0)); then
  if ((listed > 0)); then
    echo "gpu_check: FAILED: nvidia-smi lists $listed GPU(s) but CUDA sees none usable (see the probe above)"
  else
    echo "gpu_check: FAILED: no usable GPU on this machine (see the probe above)"
  fi
  exit 1
fi
built=$(sed -n 's/^gpu_probe: NCCL built against \([0-9.]*\), found.*/\1/p' "$LOGS/gpu_probe.log")
found=$(sed -n 's/^gpu_probe: NCCL built against [0-9.]*, found \([0-9.]*\).*/\1/p' "$LOGS/gpu_probe.log")
echo "NCCL: built against $built, found $found here"
if [[ "${built%.*}" != "${found%.*}" ]]; then
  echo "gpu_check: note: NCCL $found here is not the $built the binaries were built against (NCCL 2.x keeps" \
       "its ABI, but behaviour may differ)"
fi
gpus=$(sed -n 's/^gpu_probe: \([0-9]*\) CUDA device(s)$/\1/p' "$LOGS/gpu_probe.log")
if [[ "$DISTCOMM_TEST_SHARE_GPU" == 1 ]] && nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null |
     grep -qi exclusive; then
  echo "gpu_check: a GPU is in exclusive-process mode: ranks cannot share it (DISTCOMM_TEST_SHARE_GPU=0)"
  export DISTCOMM_TEST_SHARE_GPU=0
fi
echo "DISTCOMM_REQUIRE=$DISTCOMM_REQUIRE DISTCOMM_TEST_SHARE_GPU=$DISTCOMM_TEST_SHARE_GPU NCCL_DEBUG=$NCCL_DEBUG" \
     "budget ${BUDGET}s, logs in $LOGS"

# Runs one gtest suite; prints its failures, skip reasons and a count line; sets $ran.
run_suite() {
  local name=$1 limit=$2 log="$LOGS/$1.log"
  timeout -k 10 "$limit" "$BIN/bin/$name" --gtest_brief=1 >"$log" 2>&1
  local rc=$?
  show "$log"
  local total passed skipped failed
  total=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$log" | tail -n 1)
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n 1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}.*/\1/p' "$log" | tail -n 1)
  # --gtest_brief prints no "N tests, listed below" summary: count the failed cases' lines.
  failed=$(grep -c '^\[  FAILED  \] [^ ]* ([0-9]* ms)$' "$log")
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
    echo "... $((lines - 180)) lines left out (all of it in $1) ..."
    tail -n 60 "$shown"
  fi
}

# The message under each "file:line: Skipped" line of a gtest log.
skip_reasons() { awk 'prev ~ /: Skipped$/ { print } { prev = $0 }' "$1"; }

# size(B) time(us) busbw of each row of an all_reduce table (nccl-tests' columns).
table_rows() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 { print $1, $6, $8 }' "$1"; }

# The same all_reduce loop with NCCL alone, then through distcomm; counts as one case.
run_baseline() {
  local limit=$1 half=$(($1 / 2)) raw="$LOGS/raw_nccl_all_reduce.log" dc="$LOGS/nccl_all_reduce_bandwidth.log"
  timeout -k 5 "$half" "$BIN/bin/raw_nccl_all_reduce" "${BASELINE_ARGS[@]}" >"$raw" 2>&1
  local raw_rc=$?
  timeout -k 5 "$half" "$BIN/bin/nccl_all_reduce_bandwidth" "${BASELINE_ARGS[@]}" >"$dc" 2>&1
  local dc_rc=$?
  ran=0
  if ((raw_rc != 0 || dc_rc != 0)); then
    ((raw_rc != 0)) && { echo "raw_nccl_all_reduce: exit $raw_rc"; tail -n 20 "$raw"; }
    ((dc_rc != 0)) && { echo "nccl_all_reduce_bandwidth: exit $dc_rc"; tail -n 20 "$dc"; }
    echo "--- baseline: FAILED, $((SECONDS - suite_start))s"
    return 1
  fi
  if ((BASELINE_RANKS > ${gpus:-1})); then
    echo "$BASELINE_RANKS ranks on $gpus GPU(s): each rank poses as its own host, so this measures NCCL's socket" \
         "path over loopback (NCCL_SOCKET_IFNAME=lo), not NVLink or shared memory; the ratio is what distcomm adds" \
         "on that path"
  else
    echo "$BASELINE_RANKS ranks, one GPU each: NCCL's path between GPUs of one machine (P2P/NVLink or shared memory)"
  fi
  printf '%12s %12s %14s %8s %12s %14s\n' "size (B)" "NCCL (us)" "distcomm (us)" "ratio" "NCCL busbw" "distcomm busbw"
  join <(table_rows "$raw" | sort -k1,1) <(table_rows "$dc" | sort -k1,1) | sort -n -k1,1 |
    awk '{ printf "%12d %12.1f %14.1f %8.2f %12.2f %14.2f\n", $1, $2, $4, ($2 > 0 ? $4 / $2 : 0), $3, $5 }' |
    tee "$LOGS/baseline_ratio.txt"
  awk '$1 == 8 { printf "8 B latency: NCCL %.1f us, distcomm %.1f us (%+.1f us per all_reduce)\n", $2, $3, $3 - $2 }' \
    "$LOGS/baseline_ratio.txt"
  ran=1
  echo "--- baseline: both right at every size, $((SECONDS - suite_start))s"
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
  if [[ $name == baseline ]]; then run_baseline "$limit"; else run_suite "$name" "$limit"; fi || failed+=("$name")
  [[ $HOST_SUITES == *" $name "* ]] || gpu_ran=$((gpu_ran + ran))
done

echo "=== gpu_check: $((SECONDS - start)) s of ${BUDGET} s, $gpu_ran GPU case(s) ran; logs in $LOGS"
if ((gpu_ran == 0)); then
  echo "gpu_check: FAILED: no GPU case ran (every one skipped: see the reasons above)"
  exit 1
fi
if ((${#failed[@]})); then
  echo "gpu_check: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu_check: all passed"

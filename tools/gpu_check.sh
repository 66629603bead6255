#!/usr/bin/env bash
# The nccl backend on a GPU machine, in one command (about a minute), without Bazel: runs
# the binaries tools/stage_gpu_bins.sh staged in .device_bin/ -- the nccl test suites
# (conformance, every op, streams, faults, plugin/init/mixed group) and an all_reduce
# bandwidth run over every visible GPU.
#
# NCCL refuses two ranks on one GPU, so the suites run each world size up to the number of
# GPUs (world size 1 on a single-GPU machine) and skip the larger ones, saying so.
# libnccl.so.2 comes from $NCCL_LIB_DIR, the CUDA toolkit, or the nvidia-nccl-cu13 Python
# package; the CUDA runtime was staged with the binaries; the driver is the machine's.
#
#   tools/gpu_check.sh        exit status 0 when every suite passed and no value was wrong
set -uo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/.device_bin"
[[ -d "$BIN/bin" ]] || { echo "gpu_check: $BIN is missing: run tools/stage_gpu_bins.sh on a build machine first"; exit 2; }

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
TEST_TMPDIR=$(mktemp -d)
export TEST_TMPDIR
trap 'rm -rf "$TEST_TMPDIR"' EXIT

echo "=== machine"
nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"
echo "libnccl.so.2 from $NCCL_DIR"

failed=()
start=$SECONDS
for t in nccl_plugin_test nccl_init_test nccl_mixed_group_test nccl_cuda_streams_test nccl_cuda_ops_test \
         nccl_cuda_failure_test nccl_conformance_test; do
  echo "=== $t"
  timeout 300 "$BIN/bin/$t" --gtest_brief=1 2>&1 | grep -v '^\[ *\(RUN\|OK\) *\]'
  [[ ${PIPESTATUS[0]} -eq 0 ]] || failed+=("$t")
done
echo "=== all_reduce bandwidth"
timeout 300 "$BIN/bin/nccl_all_reduce_bandwidth" --max_bytes $((1 << 30)) --iters 20 || failed+=(nccl_all_reduce_bandwidth)

echo "=== gpu_check: $((SECONDS - start)) s"
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all passed"

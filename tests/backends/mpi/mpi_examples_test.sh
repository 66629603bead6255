#!/bin/bash
# The tutorial examples under mpirun with --backend=mpi: rank and size come from Open MPI,
# no MASTER_ADDR, and the output is the same as with the launcher. Settings as in mpirun_test.sh.
set -euo pipefail
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/testing/skip.sh"
if ! command -v mpirun >/dev/null 2>&1; then
  skip_test mpi "mpirun not found; install openmpi-bin (tools/setup.sh)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset XML_OUTPUT_FILE GTEST_OUTPUT TEST_PREMATURE_EXIT_FILE
scratch="$(mktemp -d /tmp/distcomm-mpirun.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
examples="$TEST_SRCDIR/distcomm/examples"

run() {  # run NP EXAMPLE [ARGS...]: output in $scratch/out
  local np="$1" example="$2"
  shift 2
  timeout 120 mpirun --oversubscribe --bind-to none -np "$np" --mca btl self,vader,tcp --mca pml ob1 \
    --mca orte_tmpdir_base "$scratch" --mca btl_vader_backing_directory "$scratch" \
    "$examples/$example" --backend=mpi "$@" >"$scratch/out" 2>&1 || {
    echo "FAILED: $example under mpirun -np $np exited non-zero:"
    cat "$scratch/out"
    exit 1
  }
}

expect_lines() {  # expect_lines TEXT: every line of TEXT appears in the output, in order
  if ! diff <(grep -F -x -f <(printf '%s\n' "$1") "$scratch/out") <(printf '%s\n' "$1") >/dev/null; then
    echo "FAILED: expected, in this order:"
    printf '%s\n' "$1"
    echo "got:"
    cat "$scratch/out"
    exit 1
  fi
}

run 3 all_reduce
expect_lines "Rank 0 has 0
Rank 1 has 0
Rank 2 has 0"

run 3 collectives
expect_lines "  rank 0 has [0] [1] [4]
  rank 2 has [102]"

run 2 point_to_point
expect_lines "rank 0: sent 0, got back 1; sent 2, got back 3; sent 4, got back 5"

run 3 average_gradients --model_path="$scratch/model.txt"
[ "$(grep -c 'parameter checksum' "$scratch/out")" = 3 ] || { cat "$scratch/out"; echo "FAILED: checksums"; exit 1; }
[ "$(grep 'parameter checksum' "$scratch/out" | awk '{print $NF}' | sort -u | wc -l)" = 1 ] || {
  cat "$scratch/out"; echo "FAILED: ranks disagree on the parameters"; exit 1; }

run 2 ddp_train --epochs=2
[ "$(grep -c "weights identical to the other ranks'" "$scratch/out")" = 2 ] || {
  cat "$scratch/out"; echo "FAILED: ddp_train"; exit 1; }
# Uneven inputs (DDP's join): ranks run 42, 22 and 2 steps per epoch; the joined ranks take
# part in the others' remaining steps, so every rank counts 84 synchronised iterations.
run 3 ddp_train --epochs=2 --uneven=20
[ "$(grep -c "DDP iteration 84: .*weights identical to the other ranks'" "$scratch/out")" = 3 ] || {
  cat "$scratch/out"; echo "FAILED: ddp_train --uneven"; exit 1; }
echo "PASSED: all examples under mpirun with --backend=mpi"

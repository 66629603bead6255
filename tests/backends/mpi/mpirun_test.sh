#!/bin/bash
# Runs a test program under Open MPI's mpirun, N ranks on this host:
#   mpirun_test.sh N path/to/program [args...]
#   mpirun_test.sh N --expect-failure-within SECONDS [--expect-output TEXT] path/to/program [args...]
#       passes if the job fails (non-zero) within SECONDS: how a dead rank must end a job;
#       with --expect-output, only if its output (any rank, stdout or stderr) has TEXT too
#   mpirun_test.sh N skip REASON      (built without Open MPI: skips with the reason, or fails
#                                     where DISTCOMM_REQUIRE lists mpi: tests/testing/skip.sh)
# The settings that matter on a small test machine:
#   --oversubscribe       more ranks than cores (mpirun refuses that otherwise)
#   --bind-to none        with 4 ranks on 2 cores, binding would pin two ranks to one core
#   OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)   mpirun refuses to run as root without both
#   --mca btl self,vader,tcp   loopback, shared memory between local ranks, TCP across hosts
#   --mca pml ob1         the BTL messaging layer: UCX or OFI would probe for hardware here
#   --tag-output          each line says which rank wrote it: [1,<rank>]<stdout>: ...
set -euo pipefail
np="$1"
shift
expect_failure_within=""
if [[ "$1" == --expect-failure-within ]]; then
  expect_failure_within="$2"
  shift 2
fi
expect_output=""
if [[ "$1" == --expect-output ]]; then
  expect_output="$2"
  shift 2
fi
program="$1"
shift
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/testing/skip.sh"
if [[ "$program" == skip ]]; then
  skip_test mpi "$*"
fi
if ! command -v mpirun >/dev/null 2>&1; then
  skip_test mpi "mpirun not found; install openmpi-bin (tools/setup.sh)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Every rank would write the same gtest XML file; Bazel writes one from the log instead.
# Nor may the ranks touch Bazel's premature-exit file: each gtest run creates it at its start
# and deletes it at its end, so a rank that ends while another starts would leave it behind
# (Bazel then fails the test) or delete the one this script's own run is owed.
unset XML_OUTPUT_FILE GTEST_OUTPUT TEST_PREMATURE_EXIT_FILE
# Open MPI names its session folder and shared-memory files after mpirun's PID. Bazel runs
# tests side by side in PID namespaces, where two mpiruns can get the same PID: give each
# run folders of its own (short: PMIx puts a Unix socket path in there).
scratch="$(mktemp -d /tmp/distcomm-mpirun.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
command=(mpirun --oversubscribe --bind-to none -np "$np" --mca btl self,vader,tcp --mca pml ob1
  --mca orte_tmpdir_base "$scratch" --mca btl_vader_backing_directory "$scratch"
  --tag-output "$program" "$@")
if [[ -z "$expect_failure_within" ]]; then
  "${command[@]}"
  exit
fi
start=$SECONDS
status=0
timeout "$((expect_failure_within + 30))" "${command[@]}" > >(tee "$scratch/output") 2>&1 || status=$?
elapsed=$((SECONDS - start))
echo "mpirun exited with status $status after ${elapsed}s"
if [[ $status -eq 0 || $status -eq 124 || $elapsed -gt $expect_failure_within ]]; then
  echo "FAILED: expected the job to fail within ${expect_failure_within}s"
  exit 1
fi
if [[ -n "$expect_output" ]] && ! grep -qF -- "$expect_output" "$scratch/output"; then
  echo "FAILED: expected the output to contain: $expect_output"
  exit 1
fi
echo "PASSED: the job failed within ${expect_failure_within}s, as it must"

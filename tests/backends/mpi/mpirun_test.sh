#!/bin/bash
# Runs a test program under Open MPI's mpirun, N ranks on this host:
#   mpirun_test.sh N path/to/program [args...]
#   mpirun_test.sh N [--expect-failure-within SECONDS | --expect-success-within SECONDS] [--expect-output TEXT]...
#                  [--btl BTL] path/to/program [args...]
#       --expect-failure-within: passes if the job fails (non-zero) within SECONDS, as a dead
#       rank must end a job (else the job must succeed); --expect-success-within: only if the
#       job succeeds within SECONDS (a job that ends late, or hangs, fails the test);
#       --expect-output (repeatable): only if its output (any rank, stdout or stderr) has each
#       TEXT too
#       --btl (tcp or vader): over that Open MPI transport alone (btl self,BTL), where
#       self,vader,tcp never picks TCP between ranks of one host; the job must end within 120 s,
#       and it fails where Open MPI reports a failed copy ("Read -1, expected N, errno = 14", a
#       copy into a bad address), which does not fail a job that otherwise succeeds
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
expect_success_within=""
expect_outputs=()
btl=""
while [[ "$1" == --* ]]; do
  case "$1" in
    --expect-failure-within) expect_failure_within="$2" ;;
    --expect-success-within) expect_success_within="$2" ;;
    --expect-output) expect_outputs+=("$2") ;;
    --btl) btl="$2" ;;
    *) echo "mpirun_test.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
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
btls="self,vader,tcp"
[[ -z "$btl" ]] || btls="self,$btl"
command=(mpirun --oversubscribe --bind-to none -np "$np" --mca btl "$btls" --mca pml ob1
  --mca orte_tmpdir_base "$scratch" --mca btl_vader_backing_directory "$scratch"
  --tag-output "$program" "$@")
if [[ -z "$expect_failure_within$expect_success_within$btl" && ${#expect_outputs[@]} -eq 0 ]]; then
  "${command[@]}"
  exit
fi
start=$SECONDS
status=0
limit=()
if [[ -n "$expect_failure_within$expect_success_within" ]]; then
  limit=(timeout "$((expect_failure_within + expect_success_within + 30))")
elif [[ -n "$btl" ]]; then
  limit=(timeout 120)  # a rank crashed inside Open MPI may leave the others waiting
fi
"${limit[@]}" "${command[@]}" > >(tee "$scratch/output") 2>&1 || status=$?
elapsed=$((SECONDS - start))
# The output's tee may still be writing: wait for it before reading the file.
wait
echo "mpirun exited with status $status after ${elapsed}s"
if [[ -n "$expect_success_within" ]] && [[ $status -ne 0 || $elapsed -gt $expect_success_within ]]; then
  if [[ $status -eq 124 ]]; then
    echo "FAILED: expected the job to succeed within ${expect_success_within}s; still running after ${elapsed}s, ended"
  else
    echo "FAILED: expected the job to succeed within ${expect_success_within}s"
  fi
  exit 1
fi
if [[ -z "$expect_failure_within" && $status -ne 0 ]]; then
  echo "FAILED: the job failed${btl:+ over btl self,$btl}"
  exit 1
fi
if [[ -n "$btl" ]] && grep -E "errno = [0-9]+" "$scratch/output"; then
  echo "FAILED: Open MPI reported a failed copy over btl self,$btl"
  exit 1
fi
if [[ -n "$expect_failure_within" ]] &&
  [[ $status -eq 0 || $status -eq 124 || $elapsed -gt $expect_failure_within ]]; then
  echo "FAILED: expected the job to fail within ${expect_failure_within}s"
  exit 1
fi
for text in "${expect_outputs[@]}"; do
  if ! grep -qF -- "$text" "$scratch/output"; then
    echo "FAILED: expected the output to contain: $text"
    exit 1
  fi
done
if [[ -n "$expect_failure_within" ]]; then
  echo "PASSED: the job failed within ${expect_failure_within}s, as it must"
elif [[ -n "$expect_success_within" ]]; then
  echo "PASSED: the job succeeded within ${expect_success_within}s and its output has what it must"
else
  echo "PASSED: the job succeeded${btl:+ over btl self,$btl}${expect_outputs[*]:+ and its output has what it must}"
fi

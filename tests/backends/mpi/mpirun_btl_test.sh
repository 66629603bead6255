#!/bin/bash
# Runs a test program under mpirun over one Open MPI transport, and fails when the job fails
# or Open MPI reports a failed copy on it:
#   mpirun_btl_test.sh BTL N path/to/program [args...]      BTL: tcp or vader
# mpirun_test.sh lists self,vader,tcp, which never picks TCP between ranks of one host; and
# Open MPI's own error lines there ("Read -1, expected N, errno = 14", a copy into a bad
# address) do not fail a job that otherwise succeeds.
set -euo pipefail
btl="$1"
np="$2"
program="$3"
shift 3
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/testing/skip.sh"
if [[ "$program" == skip ]]; then
  skip_test mpi "$*"
fi
if ! command -v mpirun >/dev/null 2>&1; then
  skip_test mpi "mpirun not found; install openmpi-bin (tools/setup.sh)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset XML_OUTPUT_FILE GTEST_OUTPUT TEST_PREMATURE_EXIT_FILE
# Folders of its own, as in mpirun_test.sh (two mpiruns in PID namespaces can share a PID).
scratch="$(mktemp -d /tmp/distcomm-mpirun.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
status=0
timeout 120 mpirun --oversubscribe --bind-to none -np "$np" --mca btl "self,$btl" --mca pml ob1 \
  --mca orte_tmpdir_base "$scratch" --mca btl_vader_backing_directory "$scratch" \
  --tag-output "$program" "$@" > >(tee "$scratch/output") 2>&1 || status=$?
wait  # for tee
if [[ $status -ne 0 ]]; then
  echo "FAILED: the job failed (status $status) over btl self,$btl"
  exit 1
fi
if grep -E "errno = [0-9]+" "$scratch/output"; then
  echo "FAILED: Open MPI reported a failed copy over btl self,$btl"
  exit 1
fi
echo "PASSED over btl self,$btl"

#!/bin/bash
# 4 ranks on 2 simulated hosts over the hierarchical backend (shm within, gloo across);
# rank 0 kills itself mid-loop. The survivors must each exit 1 with their error, never die
# of a signal: exit() destroyed the default group while the gloo watch thread recorded the
# loss through a list exit() had already destroyed (SIGSEGV, every run, before the fix).
# Three jobs, as the crash depended on that thread's timing.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
probe="${root}/tests/backends/hier/exit_after_loss_probe"
launch="${root}/tools/launch/launch"
export DISTCOMM_PLUGIN_PATH="${root}/backends/gloo:${root}/backends/shm"
for run in 1 2 3; do
  out="${TEST_TMPDIR}/job_${run}.txt"
  status=0
  timeout 120 "${launch}" --nproc_per_node=4 --backend=hier --on_failure=continue -- \
    sh -c 'DISTCOMM_HOST_ID=host$((LOCAL_RANK / 2)) exec "$0"' "${probe}" >"${out}" 2>&1 || status=$?
  [[ ${status} -ne 124 ]] || { echo "FAIL: job ${run} did not end within 120 s"; cat "${out}"; exit 1; }
  if grep -q "SIGSEGV\|SIGABRT\|terminate called" "${out}"; then
    echo "FAIL: job ${run}: a survivor died of a signal"; cat "${out}"; exit 1
  fi
  for rank in 1 2 3; do
    grep -q "launch: rank ${rank} (local rank ${rank}, pid [0-9]*) failed: exit code 1" "${out}" ||
      { echo "FAIL: job ${run}: rank ${rank} did not exit 1"; cat "${out}"; exit 1; }
  done
  grep -q "rank 0 (local rank 0, pid [0-9]*) failed first (signal SIGKILL" "${out}" ||
    { echo "FAIL: job ${run}: rank 0's death is not named first"; cat "${out}"; exit 1; }
done
echo "PASS: 3 jobs, every survivor exited 1"

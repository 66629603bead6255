#!/bin/bash
# tools/netns_hosts.sh --launcher with tools/netns_rank.sh: mpirun in host 0's namespace
# starts 2 hosts x 2 ranks of tools/bench over "hier" with hier_across=mpi; every size must
# be right, the group must name mpi across 2 hosts x 2 ranks, and each rank must have run in
# its host's namespace (its address there). Then: a launcher past --timeout is stopped with
# its ranks (none is left running), and a job of the wrong size and netns_rank.sh outside
# netns_hosts.sh are refused.
set -u
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}" || exit 1
source tests/testing/skip.sh
source tests/tools/netns/require_netns.sh
HOSTS=tools/netns_hosts.sh
NETNS_RANK=tools/netns_rank.sh
BENCH=tools/bench/bench
out="${TEST_TMPDIR:-/tmp}/netns_launcher_test.out"
fail() { echo "FAILED: $*"; echo "--- output:"; cat "${out}"; exit 1; }

require_netns netns_launcher_test
command -v mpirun >/dev/null || skip_test mpi "netns_launcher_test needs mpirun; install openmpi-bin (tools/setup.sh)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Session folders of this run's own (mpirun_test.sh says why), short: PMIx puts a socket there.
scratch="$(mktemp -d /tmp/distcomm-netns.XXXXXX)"
trap 'rm -rf "${scratch}"' EXIT
mpirun=(mpirun --oversubscribe --bind-to none --mca pml ob1 --mca orte_tmpdir_base "${scratch}")
port=$((29600 + RANDOM % 300))

# Each rank prints the address of its namespace's link before it runs bench, so the test sees
# where netns_rank.sh put it, not only what bench concluded from DISTCOMM_HOST_ID.
# shellcheck disable=SC2016  # expanded by each rank's shell
DISTCOMM_HIER_ACROSS=mpi "${HOSTS}" --hosts 2 --ranks_per_host 2 --port "${port}" --timeout 120 --launcher -- \
  "${mpirun[@]}" -np 4 "${NETNS_RANK}" sh -c 'echo "rank ${OMPI_COMM_WORLD_RANK} on ${DISTCOMM_HOST_ID} at $(ip -o -4 addr show scope global | awk "{print \$4}")";
    exec "$0" "$@"' "${BENCH}" --backend=hier -b 64K -e 4M -f 8 -n 2 -w 1 >"${out}" 2>&1 ||
  fail "the job under mpirun exited with $?"
grep -q "backend hier (cpu: shm within hosts, mpi across; 2 hosts x 2 ranks), 4 ranks" "${out}" ||
  fail "the group did not go across 2 hosts x 2 ranks over mpi"
for r in 0 1 2 3; do
  h=$((r / 2))
  grep -q "rank ${r} on host${h} at 10.214.0.$((h + 1))/24" "${out}" || fail "rank ${r} did not run in host ${h}'s namespace"
done
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +float32' "${out}")
[[ "${rows}" == 3 ]] || fail "expected 3 sizes, got ${rows}"
bad=$(grep -E '^ +[0-9]+ +[0-9]+ +float32' "${out}" | awk '$NF != 0')
[[ -z "${bad}" ]] || fail "wrong values: ${bad}"

# Ranks that outlive --timeout: the launcher is stopped, and with it (or after it) every rank.
pids="${scratch}/pids"
"${HOSTS}" --hosts 2 --ranks_per_host 2 --port "$((port + 1))" --timeout 5 --launcher -- \
  "${mpirun[@]}" -np 4 "${NETNS_RANK}" sh -c "echo \$\$ >>${pids}; exec sleep 100" >"${out}" 2>&1
rc=$?
[[ "${rc}" == 124 ]] || fail "a launcher past --timeout should make the status 124, got ${rc}"
grep -q "still running after --timeout 5 s: the launcher (mpirun)" "${out}" || fail "the timeout is not reported"
[[ "$(wc -l <"${pids}")" == 4 ]] || fail "expected 4 ranks to have started: $(cat "${pids}")"
while read -r pid; do
  # Ended, or ended and not yet reaped (a zombie).
  state=$(sed 's/.*) //' "/proc/${pid}/stat" 2>/dev/null | cut -d' ' -f1)
  [[ -z "${state}" || "${state}" == Z ]] || fail "rank process ${pid} still runs after netns_hosts.sh ended"
done <"${pids}"

"${HOSTS}" --hosts 2 --ranks_per_host 2 --port "$((port + 2))" --timeout 60 --launcher -- \
  "${mpirun[@]}" -np 3 "${NETNS_RANK}" true >"${out}" 2>&1 && fail "a job of 3 ranks on 2 hosts x 2 should fail"
grep -q "mpirun started 3 ranks; 2 hosts x 2 ranks need -np 4" "${out}" || fail "the wrong job size is not named"

env -u NETNS_HOSTS_HOLDERS "${NETNS_RANK}" true >"${out}" 2>&1
rc=$?
[[ "${rc}" == 2 ]] || fail "netns_rank.sh outside netns_hosts.sh should exit with 2, got ${rc}"
grep -q "run under tools/netns_hosts.sh --launcher" "${out}" || fail "netns_rank.sh outside netns_hosts.sh does not say why"
echo "PASSED"

#!/bin/bash
# tools/netns_hosts.sh: 2 hosts x 2 ranks of tools/bench over "hier" (every size checked,
# the group naming its layout, so the ranks did see two hosts), "auto" across hosts (the
# same hierarchy), tools/launch on each host running examples/all_reduce, a failing rank named with its status, and bad arguments refused.
set -u
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}" || exit 1
source tests/testing/skip.sh
source tests/tools/netns/require_netns.sh
HOSTS=tools/netns_hosts.sh
BENCH=tools/bench/bench
out="${TEST_TMPDIR:-/tmp}/netns_hosts_test.out"
fail() { echo "FAILED: $*"; echo "--- output:"; cat "${out}"; exit 1; }

require_netns netns_hosts_test

# A different port per test run: two runs of the suite on one machine must not meet.
port=$((29600 + RANDOM % 300))
"${HOSTS}" --hosts 2 --ranks_per_host 2 --port "${port}" -- "${BENCH}" --backend=hier -b 64K -e 4M -f 8 -n 2 -w 1 \
  >"${out}" 2>&1 || fail "the hier run exited with $?"
grep -q "backend hier (cpu: shm within hosts, gloo across; 2 hosts x 2 ranks), 4 ranks" "${out}" ||
  fail "the group did not see 2 hosts x 2 ranks"
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +float32' "${out}")
[[ "${rows}" == 3 ]] || fail "expected 3 sizes, got ${rows}"
bad=$(grep -E '^ +[0-9]+ +[0-9]+ +float32' "${out}" | awk '$NF != 0')
[[ -z "${bad}" ]] || fail "wrong values: ${bad}"

"${HOSTS}" --hosts 2 --ranks_per_host 2 --port "$((port + 1))" -- "${BENCH}" --backend=auto -b 4K -e 4K -n 2 -w 1 \
  >"${out}" 2>&1 || fail "the auto run exited with $?"
grep -q "backend auto (cpu: shm within hosts, gloo across; 2 hosts x 2 ranks), 4 ranks" "${out}" ||
  fail "auto across two hosts of two ranks should build the hierarchy"

# As on real machines: a launcher per host (--per_host), 2 ranks each, of the tutorial's
# first program over hier; rank 0 prints every rank's sum in rank order.
"${HOSTS}" --hosts 2 --per_host --port "$((port + 2))" -- sh -c 'exec tools/launch/launch --nnodes=2 \
  --node_rank="${NODE_RANK}" --nproc_per_node=2 --master_addr="${MASTER_ADDR}" --master_port="${MASTER_PORT}" \
  --backend=hier -- examples/all_reduce' >"${out}" 2>&1 || fail "the launchers' job exited with $?"
for r in 0 1 2 3; do grep -q "Rank ${r} has 0" "${out}" || fail "rank ${r}'s sum is missing or wrong"; done

"${HOSTS}" --hosts 2 --ranks_per_host 2 -- bash -c 'exit $((RANK == 3 ? 7 : 0))' >"${out}" 2>&1
rc=$?
[[ "${rc}" == 7 ]] || fail "a rank's exit status 7 should be the script's, got ${rc}"
grep -q "rank 3 (host 1) exited with status 7" "${out}" || fail "the failing rank is not named"

"${HOSTS}" --hosts 0 -- true >"${out}" 2>&1
[[ $? == 2 ]] && grep -q -- "--hosts must be 1-200, got '0'" "${out}" || fail "--hosts 0 was not refused"
"${HOSTS}" --hosts 2 >"${out}" 2>&1
[[ $? == 2 ]] && grep -q "no program given" "${out}" || fail "a missing program was not refused"
echo "PASSED"

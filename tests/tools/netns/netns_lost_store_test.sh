#!/bin/bash
# examples/ft_train over gloo on 3 simulated hosts x 2 ranks (tools/netns_hosts.sh, the job's
# store served by rank 0 on host 0); host 1's link is cut (`ip link set eth1 down`: no FIN
# or RST reaches anyone). Host 1's ranks must not wait in their op for its whole timeout
# (an outside tester: they stayed in their gloo all_reduce for the 1800 s long after the
# others had taken them for gone): once no heartbeat of theirs has reached the store for
# the heartbeat timeout (3 s), each one's liveness monitor aborts its group (its op ends),
# and once none has for its recovery timeout (5 s here: a stall of the store for everyone
# would have ended) it ends with "lost the job's store", its store connections cut off so
# that nothing of it waits for the silent store on its way out. netns_hosts.sh then stops the job (a rank failed):
# within about 3 s and a try of the cut, not at --timeout. Root: skipped with the reason elsewhere.
set -u
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}" || exit 1
source tests/testing/skip.sh
source tests/tools/netns/require_netns.sh
out="${TEST_TMPDIR:-/tmp}/netns_lost_store_test.out"
fail() { echo "FAILED: $*"; echo "--- output:"; cat "${out}"; exit 1; }

require_netns netns_lost_store_test
port=$((29600 + RANDOM % 300))
tools/netns_hosts.sh --hosts 3 --ranks_per_host 2 --port "${port}" --timeout 45 -- \
  examples/ft_train --backend=gloo --steps=100000000 --log_every=100000 --recovery_timeout_s=5 >"${out}" 2>&1 &
job=$!
# Rank 2's process (host 1), once the first generation trains.
rank2=""
for _ in $(seq 300); do
  grep -q "generation 1 (rank0, rank1, rank2, rank3, rank4, rank5) goes on from step 0" "${out}" && break
  sleep 0.1
done
sleep 2  # some steps: the ranks are in their ops
for pid in $(pgrep -x ft_train); do
  if tr '\0' '\n' <"/proc/${pid}/environ" 2>/dev/null | grep -qx RANK=2 &&
     tr '\0' '\n' <"/proc/${pid}/environ" 2>/dev/null | grep -qx "MASTER_PORT=${port}"; then
    rank2=${pid}
  fi
done
[[ -n "${rank2}" ]] || { kill "${job}"; wait "${job}"; fail "rank 2 did not start training"; }
nsenter -t "${rank2}" -n ip link set eth1 down || { kill "${job}"; wait "${job}"; fail "could not cut host 1's link"; }
cut=${SECONDS}
wait "${job}"
rc=$?
took=$((SECONDS - cut))
echo "the job ended ${took} s after host 1's link was cut (exit status ${rc})"
[[ ${rc} -ne 124 ]] || fail "host 1's ranks still ran at --timeout (45 s): they waited in their op"
for r in 2 3; do
  grep -q "ft: member 'rank${r}': no heartbeat of it has reached the job's store for .* (heartbeat timeout 3.0 s; .*take it for gone" "${out}" ||
    fail "rank ${r} did not say that it lost the store"
done
grep -q "ft: member 'rank[23]' lost the job's store in " "${out}" || fail "no rank of host 1 ended with 'lost the job's store'"
# The recovery timeout and a tick (5-7 s when written): the member cuts off its store
# connections once it takes itself for lost, so its group's teardown then asks nothing of
# the silent store (it took 12-25 s after the 3 s of its judgement before, 43 s once in CI).
(( took <= 15 )) || fail "host 1's ranks ended ${took} s after the cut, not within about the recovery timeout (5 s) and a tick"
echo "PASSED: host 1's ranks aborted their op and ended ${took} s after their link was cut"

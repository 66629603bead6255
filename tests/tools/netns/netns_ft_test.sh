#!/bin/bash
# examples/ft_train over 2 simulated hosts x 2 ranks (tools/netns_hosts.sh): every member
# must train to the end with weights identical to the others'. ft::Manager's groups listened
# on the host name, which resolves to loopback here (and on many machines), so the first
# generation failed at once with "connect [127.0.0.1]:...: Connection refused"; they now
# take init_process_group's settings, the address towards MASTER_ADDR among them.
set -u
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}" || exit 1
source tests/testing/skip.sh
source tests/tools/netns/require_netns.sh
out="${TEST_TMPDIR:-/tmp}/netns_ft_test.out"
fail() { echo "FAILED: $*"; echo "--- output:"; cat "${out}"; exit 1; }

require_netns netns_ft_test
port=$((29900 + RANDOM % 300))
tools/netns_hosts.sh --hosts 2 --ranks_per_host 2 --port "${port}" --timeout 120 -- \
  examples/ft_train --steps=20 >"${out}" 2>&1 || fail "the job exited with $?"
for r in 0 1 2 3; do
  grep -q "\[rank ${r}/4\] rank${r}: 20 steps, weights identical to the other members'" "${out}" ||
    fail "rank ${r} did not finish 20 steps in step with the others"
done
echo "PASSED: 2 hosts x 2 ranks trained 20 steps, weights identical"

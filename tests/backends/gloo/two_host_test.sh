#!/bin/bash
# Two "hosts" on one machine: two network namespaces joined by a veth pair (10.213.0.1 and
# 10.213.0.2), one rank of a gloo world in each (two_host_rank). The ranks reach each
# other only over that link: the rendezvous goes to tcp:// of the first namespace, and gloo
# must pick the address that routes there. Nothing is configured outside the two
# namespaces, and they vanish with this script.
#
# The namespaces are anonymous (unshare --net, held by a sleeping process each) rather than
# named with `ip netns add`: that needs a writable /run, which Bazel's sandbox does not
# give, and anonymous ones cannot outlive the test even if it is killed.
#
# Without the privilege to create namespaces (not root, no CAP_SYS_ADMIN/CAP_NET_ADMIN)
# the test skips with the reason (fails where DISTCOMM_REQUIRE lists netns: skip.sh).
set -u

RANK_BIN="${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/backends/gloo/two_host_rank"
IF_A="dcva$$"  # interface names: 15 characters at most
IF_B="dcvb$$"
ADDR_A=10.213.0.1
ADDR_B=10.213.0.2
PORT=29517
HOLDERS=()

cleanup() {
  for pid in "${HOLDERS[@]}"; do kill "${pid}" 2>/dev/null; done
}
trap cleanup EXIT

source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/testing/skip.sh"
skip() { skip_test netns "two_host_test needs network namespaces: $1"; }

# Starts a process in a new network namespace and prints its pid once the namespace exists.
new_namespace() {
  local err="${TEST_TMPDIR:-/tmp}/unshare_$1.err"
  # stdout elsewhere: the caller reads ours through $(...), which would wait for the holder.
  unshare --net -- sleep 600 >/dev/null 2>"${err}" &
  local pid=$!
  for _ in $(seq 100); do
    if ! kill -0 "${pid}" 2>/dev/null; then
      echo "unshare --net failed: $(cat "${err}")" >&2
      return 1
    fi
    if [[ "$(readlink "/proc/${pid}/ns/net")" != "$(readlink /proc/$$/ns/net)" ]]; then
      echo "${pid}"
      return 0
    fi
    sleep 0.05
  done
  kill "${pid}"
  echo "unshare --net did not create a namespace" >&2
  return 1
}

in_ns() {
  local pid=$1
  shift
  nsenter --net="/proc/${pid}/ns/net" "$@"
}

for tool in ip unshare nsenter; do
  command -v "${tool}" >/dev/null || skip "the ${tool} command is not installed"
done
PID_A=$(new_namespace a 2>"${TEST_TMPDIR:-/tmp}/ns.err") || skip "$(cat "${TEST_TMPDIR:-/tmp}/ns.err")"
HOLDERS+=("${PID_A}")
PID_B=$(new_namespace b 2>"${TEST_TMPDIR:-/tmp}/ns.err") || skip "$(cat "${TEST_TMPDIR:-/tmp}/ns.err")"
HOLDERS+=("${PID_B}")

# Every step runs inside the new namespaces: they belong to this test, so it may configure
# them even where the surrounding namespace (Bazel's sandbox) is not its to change.
setup() {
  # The veth pair is created in A with its peer end moved straight into B.
  in_ns "${PID_A}" ip link add "${IF_A}" type veth peer name "${IF_B}" netns "${PID_B}" &&
    in_ns "${PID_A}" ip addr add "${ADDR_A}/24" dev "${IF_A}" &&
    in_ns "${PID_B}" ip addr add "${ADDR_B}/24" dev "${IF_B}" &&
    in_ns "${PID_A}" ip link set lo up &&
    in_ns "${PID_B}" ip link set lo up &&
    in_ns "${PID_A}" ip link set "${IF_A}" up &&
    in_ns "${PID_B}" ip link set "${IF_B}" up
}
if ! err=$(setup 2>&1); then
  case "${err}" in
    *"not permitted"*|*"Permission denied"*) skip "setting up the veth pair was refused: ${err}" ;;
  esac
  echo "FAILED: setting up the namespaces: ${err}"
  exit 1
fi

echo "namespace A: $(in_ns "${PID_A}" ip -br addr | tr -s ' ' | tr '\n' ';')"
echo "namespace B: $(in_ns "${PID_B}" ip -br addr | tr -s ' ' | tr '\n' ';')"

INIT="tcp://${ADDR_A}:${PORT}"
timeout 60 nsenter --net="/proc/${PID_A}/ns/net" "${RANK_BIN}" 0 2 "${INIT}" &
RANK0=$!
timeout 60 nsenter --net="/proc/${PID_B}/ns/net" "${RANK_BIN}" 1 2 "${INIT}" &
RANK1=$!
wait "${RANK0}"; STATUS0=$?
wait "${RANK1}"; STATUS1=$?

if [[ ${STATUS0} -ne 0 || ${STATUS1} -ne 0 ]]; then
  echo "FAILED: rank 0 exited with ${STATUS0}, rank 1 with ${STATUS1} (124: timed out)"
  exit 1
fi
echo "PASSED: both ranks got the right results across the veth pair"

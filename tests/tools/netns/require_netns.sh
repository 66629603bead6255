# Sourced by the netns tests after tests/testing/skip.sh: skips the test (with the reason, or
# fails it where DISTCOMM_REQUIRE lists netns) unless this machine can make network
# namespaces and has the tools tools/netns_hosts.sh runs. $1: the test's name, for the message.
# tc and ip live in sbin, which a test's (or a plain user's) PATH may lack.
export PATH="${PATH}:/usr/sbin:/sbin"
require_netns() {
  local tool
  for tool in ip tc unshare nsenter; do
    command -v "${tool}" >/dev/null || skip_test netns "$1 needs ${tool} (tools/setup.sh)"
  done
  if ! unshare --net true 2>/dev/null; then
    skip_test netns "$1 needs network namespaces (root, or CAP_SYS_ADMIN): unshare --net fails here"
  fi
}

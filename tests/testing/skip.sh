# Skips that CI can refuse, for shell tests (source it; require.h is the C++ side):
#   skip_test WHAT REASON...
# Where DISTCOMM_REQUIRE (comma-separated) lists WHAT, the test fails with the reason.
# Otherwise it prints "SKIPPED: REASON", records the skip where Bazel keeps a test's
# results (test.xml, with a <skipped> test case, and the warnings file) and exits 0.

skip_test() {
  local what="$1"
  shift
  if [[ ",${DISTCOMM_REQUIRE:-}," == *",${what},"* ]]; then
    echo "FAILED: DISTCOMM_REQUIRE lists '${what}', so this test may not skip for want of it. It would have skipped: $*"
    exit 1
  fi
  echo "SKIPPED: $*"
  if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
    local reason
    reason="$(printf '%s' "$*" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g')"
    cat >"${XML_OUTPUT_FILE}" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" failures="0" errors="0" skipped="1">
  <testsuite name="${TEST_TARGET:-shell}" tests="1" failures="0" errors="0" skipped="1">
    <testcase name="${TEST_TARGET:-shell}" status="notrun" result="skipped">
      <skipped message="${reason}"/>
    </testcase>
  </testsuite>
</testsuites>
XML
  fi
  if [[ -n "${TEST_WARNINGS_OUTPUT_FILE:-}" ]]; then echo "SKIPPED: $*" >>"${TEST_WARNINGS_OUTPUT_FILE}"; fi
  exit 0
}

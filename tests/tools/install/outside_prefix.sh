# Sourced by the install tests: what each needs to use distcomm from a fresh prefix outside
# the tree. `outside_prefix NAME` sets src (the runfiles: tools/install/install and the
# consumers' sources), work ($TEST_TMPDIR/NAME, emptied) and prefix ($work/prefix), and
# clears the variables that would let a consumer find plugins other than the installed ones.
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_line() {  # expect_line OUTPUT LINE: LINE is one whole line of OUTPUT
  grep -qxF -- "$2" <<<"$1" || fail "expected the line '$2' in:"$'\n'"$1"
}
outside_prefix() {
  src="$PWD"
  work="${TEST_TMPDIR:-$(mktemp -d)}/$1"
  prefix="$work/prefix"
  rm -rf "$work"
  mkdir -p "$work"
  unset DISTCOMM_PLUGIN_PATH DISTCOMM_BACKEND
}

#!/bin/bash
# examples/ft_train run by hand with --kill_rank and no --replace_after_s: its own launcher
# replaces the killed rank after the flag's default (1 s), so the others must wait for the
# replacement (as when the flag is typed) instead of finishing 20 steps in far less than that
# and leaving the killed rank as the job's failure (exit 137, "its replacement was not due
# before the other ranks ended").
set -euo pipefail
program="${TEST_SRCDIR}/${TEST_WORKSPACE}/examples/ft_train"
out="${TEST_TMPDIR}/ft_train.out"
fail() { echo "FAIL: $*"; echo "--- output:"; cat "${out}"; exit 1; }

status=0
timeout 120 "${program}" --nproc=3 --kill_rank=1 --kill_step=5 --steps=20 --backend=gloo >"${out}" 2>&1 || status=$?
[[ ${status} -eq 0 ]] || fail "the job exited with ${status}"
grep -q "the job succeeded" "${out}" || fail "no 'the job succeeded' line"
# The replacement (rank1+1) trained and ended with weights equal to the others'.
grep -q "rank1+1: .* steps, weights identical to the other members'" "${out}" ||
  fail "the replacement rank1+1 did not end beside the others"
echo "PASS"

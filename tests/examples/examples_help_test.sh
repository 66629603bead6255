#!/bin/bash
# Every example's --help lists its own flags (and -h too), ends 0 and starts no rank; gflags'
# internal flags and its "SetUsageMessage() never called" warning stay out (--helpfull has them).
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}/examples"
fail() { echo "FAIL: $*"; exit 1; }

check() {  # program flag-it-must-list
  local out
  out=$(timeout 20 "${root}/$1" --help 2>&1) || fail "$1 --help exited $?: ${out}"
  [[ "${out}" == *"--nproc="* && "${out}" == *"--backend="* ]] || fail "$1 --help lacks --nproc/--backend: ${out}"
  [[ "${out}" == *"--$2="* ]] || fail "$1 --help lacks its own --$2: ${out}"
  [[ "${out}" != *"SetUsageMessage"* && "${out}" != *"tab_completion"* ]] || fail "$1 --help shows gflags' internals: ${out}"
  [[ "${out}" != *"Rank 0 has"* && "${out}" != *"epoch"*"loss"* ]] || fail "$1 --help ran ranks: ${out}"
  out=$(timeout 20 "${root}/$1" -h 2>&1) || fail "$1 -h exited $?"
  [[ "${out}" == *"--nproc="* ]] || fail "$1 -h lacks --nproc: ${out}"
}

check all_reduce nproc
check ddp_train epochs
check ft_train kill_rank
echo PASS

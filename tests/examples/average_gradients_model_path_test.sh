#!/bin/bash
# examples/average_gradients saves its model, by default, in the folder it was started from
# under a name of the job's own, and its last line is "rank 0 saved the model to PATH" with
# PATH absolute and holding the whole model. Two jobs started at once in one folder -- self-
# launched, through tools/launch, or single ranks with no run id (as under mpirun) -- must
# write two files: a fixed default name would give both the same one. Under `bazel run`
# (BUILD_WORKING_DIRECTORY) the folder is the user's, not the runfiles the program runs in.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
program="${root}/examples/average_gradients"
launch="${root}/tools/launch/launch"
fail() { echo "FAIL: $*"; exit 1; }

# saved_path OUT: the path that OUT's last line names ("[rank 0] " from tools/launch aside).
saved_path() {
  local last
  last=$(tail -n 1 "$1")
  last="${last#\[rank 0\] }"
  [[ "${last}" == "rank 0 saved the model to /"* ]] ||
    fail "the last line of $1 is '${last}', not 'rank 0 saved the model to /...':"$'\n'"$(cat "$1")"
  echo "${last#rank 0 saved the model to }"
}

# check_model PATH DIR: PATH is a file in DIR, with every parameter of the model (4 of them:
# a name line and a values line each).
check_model() {
  [[ "$(dirname "$1")" == "$2" ]] || fail "$1 is not in $2"
  [[ -f "$1" ]] || fail "no file $1"
  [[ "$(head -n 1 "$1")" == "fc0.weight float32[4, 16] on cpu" ]] || fail "$1 does not start with fc0.weight"
  [[ $(grep -c ' on cpu$' "$1") -eq 4 && $(wc -l <"$1") -eq 8 ]] || fail "$1 is not a whole model:"$'\n'"$(cat "$1")"
}

# two_jobs_at_once NAME DIR COMMAND...: runs COMMAND twice at once, from DIR; both succeed,
# and they name two files, both in DIR and whole.
two_jobs_at_once() {
  local name="$1" dir="$2"
  shift 2
  mkdir -p "${dir}"
  (cd "${dir}" && "$@" >"${TEST_TMPDIR}/${name}.1" 2>"${TEST_TMPDIR}/${name}.1.err") &
  local first=$!
  (cd "${dir}" && "$@" >"${TEST_TMPDIR}/${name}.2" 2>"${TEST_TMPDIR}/${name}.2.err") &
  local second=$!
  wait "${first}" || fail "${name}: the first job failed: $(cat "${TEST_TMPDIR}/${name}.1.err")"
  wait "${second}" || fail "${name}: the second job failed: $(cat "${TEST_TMPDIR}/${name}.2.err")"
  local one two
  one=$(saved_path "${TEST_TMPDIR}/${name}.1")
  two=$(saved_path "${TEST_TMPDIR}/${name}.2")
  [[ "${one}" != "${two}" ]] || fail "${name}: two jobs at once both saved to ${one}"
  check_model "${one}" "${dir}"
  check_model "${two}" "${dir}"
  echo "${name}: ${one} and ${two}"
}

work="${TEST_TMPDIR}/work"
two_jobs_at_once self_launched "${work}/self" "${program}" --nproc=2 --epochs=2
two_jobs_at_once through_launcher "${work}/launch" "${launch}" --nproc_per_node=2 -- "${program}" --epochs=2
# One rank that a launcher without a run id started (mpirun, srun): the name is its pid's.
two_jobs_at_once no_run_id "${work}/no_run_id" \
  env -u DISTCOMM_RUN_ID RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=0 "${program}" --epochs=2

# `bazel run`: the program runs in its runfiles; the file goes to the user's folder, and a
# relative --model_path means a file there too.
mkdir -p "${work}/runfiles" "${work}/user"
cd "${work}/runfiles"
BUILD_WORKING_DIRECTORY="${work}/user" "${program}" --nproc=2 --epochs=2 >"${TEST_TMPDIR}/bazel_run" 2>&1 ||
  fail "the job failed: $(cat "${TEST_TMPDIR}/bazel_run")"
check_model "$(saved_path "${TEST_TMPDIR}/bazel_run")" "${work}/user"
BUILD_WORKING_DIRECTORY="${work}/user" "${program}" --nproc=2 --epochs=2 --model_path=mine.txt \
  >"${TEST_TMPDIR}/bazel_run_path" 2>&1 || fail "the job failed: $(cat "${TEST_TMPDIR}/bazel_run_path")"
[[ "$(saved_path "${TEST_TMPDIR}/bazel_run_path")" == "${work}/user/mine.txt" ]] ||
  fail "--model_path=mine.txt: $(tail -n 1 "${TEST_TMPDIR}/bazel_run_path")"
check_model "${work}/user/mine.txt" "${work}/user"
[[ -z "$(ls "${work}/runfiles")" ]] || fail "files left in the runfiles folder: $(ls "${work}/runfiles")"
echo PASS

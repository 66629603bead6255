#!/usr/bin/env bash
# How long a job stands still after a rank fails: from the moment a rank of
# examples/resumable_train kills itself to the moment rank 0 of the restarted job has
# completed its first step (both Unix times in ns, printed by the program on one host),
# for each backend, REPEATS times, with the median. Also the two parts it is made of: the
# program's start-up (main() entered -> first step done: init_process_group, reading the
# checkpoint, the broadcasts, one step) and the rest (the failure seen, the other ranks
# stopped, the new ones started up to their main()).
#
#   bazel run //tests/tools/launch:restart_latency -- [NPROC] [REPEATS] [BACKENDS...]
set -euo pipefail
here="${BASH_SOURCE[0]}.runfiles/distcomm"
[[ -d "$here" ]] || here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
launch="$here/tools/launch/launch"
train="$here/examples/resumable_train"
nproc="${1:-4}"
repeats="${2:-3}"
shift $(( $# > 2 ? 2 : $# ))
backends=("${@:-gloo shm}")
[[ $# -gt 0 ]] || backends=(gloo shm)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for backend in "${backends[@]}"; do
  : >"$work/total" ; : >"$work/launcher" ; : >"$work/startup"
  for ((i = 0; i < repeats; ++i)); do
    rm -rf "$work/ckpt"
    "$launch" --nproc_per_node="$nproc" --backend="$backend" --max_restarts=1 -- "$train" \
      --checkpoint_dir="$work/ckpt" --steps=60 --checkpoint_every=20 --fail_at_step=45 --fail_rank=$((nproc - 1)) \
      >"$work/out" 2>"$work/err"
    died=$(sed -n 's/.*kills itself at step [0-9]* (unix_ns \([0-9]*\)).*/\1/p' "$work/out")
    resumed=$(sed -n 's/.*first step of this attempt (41) done at unix_ns \([0-9]*\), \([0-9.]*\) s after.*/\1 \2/p' "$work/out")
    if [[ -z "$died" || -z "$resumed" ]] || ! grep -q "restart 1 of 1 in" "$work/err"; then
      echo "run $i on $backend did not fail and resume as expected:" >&2
      cat "$work/out" "$work/err" >&2
      exit 1
    fi
    total_ms=$(( (${resumed% *} - died) / 1000000 ))
    startup_ms=$(awk -v s="${resumed#* }" 'BEGIN { printf "%d", s * 1000 }')
    echo "$total_ms" >>"$work/total"
    echo "$startup_ms" >>"$work/startup"
    echo $(( total_ms - startup_ms )) >>"$work/launcher"
  done
  printf '%s, %d ranks, median of %d: failure -> first step of the restarted job %s ms ' "$backend" "$nproc" "$repeats" \
    "$(median <"$work/total")"
  printf '(medians of its parts: %s ms until the new ranks run, %s ms from there to their first step); all runs: %s ms\n' \
    "$(median <"$work/launcher")" "$(median <"$work/startup")" "$(tr '\n' ' ' <"$work/total")"
done

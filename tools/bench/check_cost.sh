#!/bin/bash
# What the checks against ranks that disagree cost (docs/failures.md, "When a job fails"):
# tools/bench all_reduce (float32) at 8 B and 1 MiB on 2 ranks, over gloo (default checks: the
# tag and slot fingerprints plus the stall watch; DISTCOMM_DEBUG=DETAIL) and over mpi under
# mpirun (agreement check on, the default; off; DETAIL), and over shm (its per-round op hash and
# tag, always on); with --before BENCH, also shm through BENCH, a bench built from a tree
# without shm's check (commit 34dbae3, the parent of the one that added it: `git worktree
# add /tmp/before 34dbae3 && (cd /tmp/before && bazel build -c opt //tools/bench && bazel shutdown)`:
# that tree's Bazel server would otherwise take the measured ranks' cores). Each
# setting is a separate job, in alternating rounds; prints the median over rounds of each
# job's median time per op and its busbw. Measured at normal priority, as users run; the
# load average is logged with each run.
#
#   tools/bench/check_cost.sh [--rounds N] [--before BENCH] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3
before=""
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --before) before="$(realpath "$2")"; shift 2 ;;
    *) echo "check_cost.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
out="${1:-${TMPDIR:-/tmp}/distcomm_check_cost}"
mkdir -p "$out"
results="$out/results.txt"  # setting size time_us busbw round
: >"$results"
log="$out/log.txt"
: >"$log"

source tools/measure_build.sh
measure_build //tools/bench
bench="$bin/tools/bench/bench"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader --mca pml ob1
  -x DISTCOMM_DEBUG -x DISTCOMM_MPI_AGREEMENT_CHECK)
field() { sed -E "s/.*\"$1\":([-0-9.e+]+).*/\1/" <<<"$2"; }

run() {  # setting size round
  local setting="$1" size="$2" iters=2000 json="$out/bench.json"
  (( size >= 1048576 )) && iters=100
  local args=(--op=all_reduce -b "$size" -e "$size" -n "$iters" -w 20 --json="$json")
  echo "# round $3: $setting $size B (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >>"$log"
  case "$setting" in
    gloo_default) DISTCOMM_DEBUG=OFF "$bench" --backend=gloo --nproc=2 "${args[@]}" >>"$log" 2>&1 ;;
    gloo_detail) DISTCOMM_DEBUG=DETAIL "$bench" --backend=gloo --nproc=2 "${args[@]}" >>"$log" 2>&1 ;;
    mpi_check_on) DISTCOMM_DEBUG=OFF DISTCOMM_MPI_AGREEMENT_CHECK=1 "${mpirun[@]}" "$bench" --backend=mpi "${args[@]}" >>"$log" 2>&1 ;;
    mpi_check_off) DISTCOMM_DEBUG=OFF DISTCOMM_MPI_AGREEMENT_CHECK=0 "${mpirun[@]}" "$bench" --backend=mpi "${args[@]}" >>"$log" 2>&1 ;;
    mpi_detail) DISTCOMM_DEBUG=DETAIL DISTCOMM_MPI_AGREEMENT_CHECK=1 "${mpirun[@]}" "$bench" --backend=mpi "${args[@]}" >>"$log" 2>&1 ;;
    shm_check) DISTCOMM_DEBUG=OFF "$bench" --backend=shm --nproc=2 "${args[@]}" >>"$log" 2>&1 ;;
    shm_before) DISTCOMM_DEBUG=OFF "$before" --backend=shm --nproc=2 "${args[@]}" >>"$log" 2>&1 ;;
  esac
  local line
  line="$(head -1 "$json")"
  echo "$setting $size $(field time_median_us "$line") $(field busbw "$line") $3" >>"$results"
}

settings="gloo_default gloo_detail mpi_check_on mpi_check_off mpi_detail shm_check${before:+ shm_before}"
for round in $(seq 1 "$rounds"); do
  order="$settings"
  (( round % 2 == 0 )) && order="$(tr ' ' '\n' <<<"$settings" | tac | tr '\n' ' ')"
  for size in 8 1048576; do
    for setting in $order; do run "$setting" "$size" "$round"; done
  done
done

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "setting size_B median_time_us busbw_GBps (median over $rounds rounds)"
for size in 8 1048576; do
  for setting in $settings; do
    t="$(awk -v s="$setting" -v z="$size" '$1 == s && $2 == z { print $3 }' "$results" | median)"
    b="$(awk -v s="$setting" -v z="$size" '$1 == s && $2 == z { print $4 }' "$results" | median)"
    echo "$setting $size $t $b"
  done
done

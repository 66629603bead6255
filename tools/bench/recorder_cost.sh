#!/bin/bash
# What the flight recorder costs per op: tools/bench with the recorder on (the default,
# DISTCOMM_TRACE_BUFFER=2000) and off (DISTCOMM_TRACE_BUFFER=0), each a separate job, in
# alternating rounds; then the median of the rounds' median times per backend and size.
#
#   tools/bench/recorder_cost.sh [--rounds N] [--backends "gloo shm"] [--sizes "8 1048576"] [OUT_DIR]
#
# all_reduce, 2 ranks, float32; 2000 iterations below 1 MiB, 200 from 1 MiB, after 50
# warm-ups. Run it at normal priority, as users run (a `chrt -f 20` figure may stand beside,
# labelled); the load average is logged with each run. Builds with -c opt first and stops
# the Bazel server (tools/measure_build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=3
backends="gloo shm"
sizes="8 1048576"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "recorder_cost.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
out="${1:-${TMPDIR:-/tmp}/distcomm_recorder_cost}"
mkdir -p "$out"
results="$out/results.txt"  # backend size recorder round median_us
: > "$results"
source tools/measure_build.sh
measure_build //tools/bench //backends:plugins
bench="$bin/tools/bench/bench"

for round in $(seq 1 "$rounds"); do
  for backend in $backends; do
    for size in $sizes; do
      iters=2000
      [[ "$size" -ge 1048576 ]] && iters=200
      for buffer in 2000 0; do
        json="$out/run.json"
        DISTCOMM_TRACE_BUFFER=$buffer "$bench" --op=all_reduce --backend="$backend" --nproc=2 -b "$size" -e "$size" \
          -n "$iters" -w 50 -c 1 --json="$json" > "$out/last.txt"
        median=$(grep -o '"time_median_us":[0-9.e+-]*' "$json" | head -1 | cut -d: -f2)
        state=on; [[ "$buffer" == 0 ]] && state=off
        echo "$backend $size $state $round $median" >> "$results"
        echo "round $round $backend ${size}B recorder $state: median ${median} us (load $(cut -d' ' -f1 /proc/loadavg))"
      done
    done
  done
done

echo "median over $rounds rounds (us per all_reduce, 2 ranks):"
for backend in $backends; do
  for size in $sizes; do
    on=$(awk -v b="$backend" -v s="$size" '$1==b && $2==s && $3=="on" {print $5}' "$results" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    off=$(awk -v b="$backend" -v s="$size" '$1==b && $2==s && $3=="off" {print $5}' "$results" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "$backend ${size}B: on $on, off $off, difference $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.2f", a - b}') us"
  done
done

#!/bin/bash
# The shm backend against Open MPI on this host, measured as the shm issue asks: tools/bench
# over backend shm, and Open MPI's own collectives with nothing of distcomm in the process
# (tools/bench/reference/raw_mpi_collectives: MPI_Allreduce is the measurement of
# ../shared/anchors/raw_mpi_bench.cc), each a separate job, in alternating rounds; then the
# median of the rounds per op and size, and one single-thread memcpy for scale.
#
#   tools/bench/shm_vs_mpi.sh [--rounds N] [--nproc N] [--ops "all_reduce ..."] [--sizes "8 65536 ..."] [OUT_DIR]
#
# Defaults: 3 rounds, 2 ranks, all_reduce all_gather reduce_scatter broadcast, 8 B 64 KiB
# 1 MiB 16 MiB 64 MiB (float32). Iterations as the anchor's: 200 below 1 MiB, 10 from 1 MiB,
# after 3 warm-up calls; each side runs an op's sizes in one job, smallest first. Both sides
# report the same figure: each rank's timed loop divided by its calls, the slowest rank's
# (bench's time_loop_us), and nccl-tests' busbw of it; for all_gather and reduce_scatter
# bench's out-of-place row (as MPI's calls are). Run it at normal priority, as users run (a
# `chrt` figure may stand beside, labelled, never instead), on a quiet machine; the Bazel
# server is stopped once the programs are built (tools/measure_build.sh). Every bench run
# also checks its results (#wrong must be 0, else this script fails). The load average is
# logged with each run: numbers from a busy machine are not worth quoting.
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=3
nproc=2
ops="all_reduce all_gather reduce_scatter broadcast"
sizes="8 65536 1048576 16777216 67108864"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --nproc) nproc="$2"; shift 2 ;;
    --ops) ops="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "shm_vs_mpi.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
out="${1:-${TMPDIR:-/tmp}/distcomm_shm_vs_mpi}"
mkdir -p "$out"
results="$out/results.txt"  # one line per measurement: op size side time_us busbw round (shm: time_loop_us)
: > "$results"
log="$out/log.txt"
: > "$log"

source tools/measure_build.sh
measure_build //tools/bench //tools/bench/reference:raw_mpi_collectives
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun -np "$nproc" --oversubscribe --bind-to none --mca btl self,vader --mca pml ob1)

field() { sed -E "s/.*\"$1\":([-0-9.e+]+).*/\1/" <<<"$2"; }
note() { echo "# $* (load average: $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$log"; }

run_shm() {  # op round: every size in one job, smallest first, as raw_mpi_collectives runs
  # them, so that both sides measure a process in the same state. (shm's first few ops at
  # each new size of 1 MiB and up are slow, in a fresh process or not: with 3 warm-ups and
  # 10 timed calls the mean at 1 MiB is 3-8x the steady time; cause not found yet.)
  local json="$out/bench.json" size line
  note "round $2: bench --backend=shm --op=$1 --nproc=$nproc --sizes=${sizes// /,}"
  "$bin/tools/bench/bench" --backend=shm --op="$1" --nproc="$nproc" --sizes="${sizes// /,}" -n 200 --large_iters=10 \
    -w 3 --json="$json" >>"$log" 2>&1
  for size in $sizes; do
    line="$(grep "\"bytes\":$size," "$json" | grep '"inplace":false' | head -1 || true)"
    [[ -n "$line" ]] || line="$(grep "\"bytes\":$size," "$json" | head -1)"
    if [[ "$(field wrong "$line")" != "0" ]]; then echo "shm_vs_mpi.sh: bench found wrong values: $line" >&2; exit 1; fi
    # time_loop_us, as MPI's side times (each rank's loop / calls, the slowest rank's); busbw
    # rescaled to it (bench's busbw is of time_us, which is now that same loop figure: the
    # factor is 1; kept for JSON from bench before 2026-12-06).
    local loop; loop="$(field time_loop_us "$line")"
    echo "$1 $size shm $loop $(awk -v b="$(field busbw "$line")" -v t="$(field time_us "$line")" -v l="$loop" \
      'BEGIN {printf "%.6g", (l > 0) ? b * t / l : 0}') $2" >>"$results"
  done
}

run_mpi() {  # op round
  note "round $2: mpirun -np $nproc raw_mpi_collectives --op=$1 $sizes"
  "${mpi[@]}" "$bin/tools/bench/reference/raw_mpi_collectives" --op="$1" $sizes | tee -a "$log" |
    sed -nE "s/^raw-mpi op=([a-z_]+) n=[0-9]+ bytes=([0-9]+) time_us=([0-9.]+) algbw=[0-9.]+ busbw=([0-9.]+)/\1 \2 mpi \3 \4 $2/p" \
      >>"$results"
}

for round in $(seq 1 "$rounds"); do
  for op in $ops; do
    run_shm "$op" "$round"
    run_mpi "$op" "$round"
  done
  note "round $round: memcpy"
  "$bin/tools/bench/reference/raw_mpi_collectives" --op=memcpy 67108864 | tee -a "$log" |
    sed -nE "s/^raw-mpi op=memcpy n=1 bytes=([0-9]+) time_us=([0-9.]+) algbw=([0-9.]+) busbw=[0-9.]+/memcpy \1 one-thread \2 \3 $round/p" \
      >>"$results"
done

# Median over the rounds of each (op, size, side); MPI's sizes are its buffers' (a multiple
# of nproc elements), so rows pair up by op and order.
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo
echo "# shm vs Open MPI, $nproc ranks, float32, median of $rounds rounds (time in us, busbw in GB/s)"
printf "%-15s %12s %10s %10s %10s %10s %12s\n" op size shm_us shm_busbw mpi_us mpi_busbw shm/mpi
for op in $ops; do
  for size in $sizes; do
    shm_t=$(awk -v o="$op" -v s="$size" '$1 == o && $2 == s && $3 == "shm" {print $4}' "$results" | median)
    shm_b=$(awk -v o="$op" -v s="$size" '$1 == o && $2 == s && $3 == "shm" {print $5}' "$results" | median)
    n=$(awk -v o="$op" -v s="$size" '$1 == o && $3 == "shm" {print $2}' "$results" | sort -gu | grep -n "^$size\$" | cut -d: -f1)
    mpi_size=$(awk -v o="$op" '$1 == o && $3 == "mpi" {print $2}' "$results" | sort -gu | sed -n "${n}p")
    mpi_t=$(awk -v o="$op" -v s="$mpi_size" '$1 == o && $2 == s && $3 == "mpi" {print $4}' "$results" | median)
    mpi_b=$(awk -v o="$op" -v s="$mpi_size" '$1 == o && $2 == s && $3 == "mpi" {print $5}' "$results" | median)
    # Latency rows compare times (MPI's over shm's: above 1 is shm faster); the rest busbw.
    ratio=$(awk -v s="$size" -v a="$shm_t" -v b="$mpi_t" -v x="$shm_b" -v y="$mpi_b" \
      'BEGIN {if (s <= 64) printf "%.2f (time)", b / a; else if (y > 0) printf "%.2f", x / y; else print "-"}')
    printf "%-15s %12s %10.2f %10.2f %10.2f %10.2f %12s\n" "$op" "$size" "$shm_t" "$shm_b" "$mpi_t" "$mpi_b" "$ratio"
  done
done
memcpy=$(awk '$1 == "memcpy" {print $5}' "$results" | median)
echo "# one single-thread memcpy of 64 MiB: $memcpy GB/s (median of $rounds); the aim is shm all_reduce busbw >= half of it"
echo "# raw lines in $results, runs in $log"

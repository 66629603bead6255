#!/bin/bash
# Every speed aim of docs/performance.md's "At normal priority" section, measured in one
# window, at normal priority, each program a separate job in alternating rounds, with a
# verdict per aim. The aims are compared within one run only: on a shared VM the figures
# move by 2x between hours, so aims met in different windows prove nothing together.
#
#   tools/bench/speed_gates.sh [--rounds N] [--ddp_rounds N] [OUT_DIR]
#
# Runs (~20 minutes on 2 cores, builds included): compare_gloo.py (distcomm's gloo against
# raw gloo and PyTorch's), ddp_bench/compare_backends.sh (DDP over shm against gloo),
# torch_ddp_bench/compare.sh (libtorch DDP against PyTorch's Python DDP), shm_vs_mpi.sh (shm
# against Open MPI, and a memcpy), and init + one all_reduce at 96 ranks, shm against gloo.
# Each script's own output is kept in OUT_DIR; the last lines are one verdict per aim and
# "speed aims: M of N met". Run it on a quiet machine (nothing else building or running): the
# load average is printed with every step. Exits 1 when a step fails, 0 otherwise (a missed
# aim is a measurement, not a failure of the script).
set -uo pipefail
cd "$(dirname "$0")/../.."

rounds=5
ddp_rounds=5
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --ddp_rounds) ddp_rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "speed_gates.sh: unknown argument $1" >&2; exit 2 ;;
    *) out="$1"; shift ;;
  esac
done
out="${out:-$(mktemp -d "${TMPDIR:-/tmp}/speed_gates.XXXXXX")}"
mkdir -p "$out" || exit 1
verdicts="$out/verdicts.txt"
: >"$verdicts"

step() {  # step NAME COMMAND...: runs it into OUT/NAME.txt, printing the load before and after
  local name="$1"
  shift
  echo "# $(date -u +%H:%M:%S) $name: $* (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  if ! "$@" >"$out/$name.txt" 2>&1; then
    echo "speed_gates.sh: $name failed; its output: $out/$name.txt" >&2
    tail -20 "$out/$name.txt" >&2
    exit 1
  fi
}
aim() {  # aim MET(0/1) TEXT
  echo "$([[ "$1" == 1 ]] && echo met || echo MISSED): $2" >>"$verdicts"
}
# a <= b, numbers only: a figure that did not parse (a script's output changed) is no "met".
le() { [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ && "$2" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v a="$1" -v b="$2" 'BEGIN {exit !(a <= b)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}'; }

# 1. gloo against raw gloo (busbw >= 0.95x from 1 MiB, 8 B within max(+10%, +20 us)) and
#    never behind PyTorch's gloo: compare_gloo.py judges each size itself.
step gloo tools/bench/compare_gloo.py --nproc=2 --rounds="$rounds" --sizes=8,1M,4M,16M,64M
while IFS='|' read -r _ size raw dc torch _ _ _ _ _ aims _; do
  size=$(echo $size)
  aim "$([[ "$aims" == *MISSED* ]] && echo 0 || echo 1)" \
    "gloo all_reduce $size B: distcomm $(echo $dc) us, raw gloo $(echo $raw) us, PyTorch $(echo $torch) us ($(echo $aims))"
done < <(grep -E '^\| [0-9]+ \|' "$out/gloo.txt")

# 2. DDP: shm's exposed communication <= 0.5x gloo's, its local step within 5% of gloo's job's.
step ddp tools/ddp_bench/compare_backends.sh --rounds "$ddp_rounds" --backends "shm gloo"
read -r shm_local shm_exposed < <(awk '$1 == "shm" && NF >= 8 {print $2, $4}' "$out/ddp.txt" | tail -1)
read -r gloo_local gloo_exposed < <(awk '$1 == "gloo" && NF >= 8 {print $2, $4}' "$out/ddp.txt" | tail -1)
aim "$(le "$shm_exposed" "$(awk -v g="$gloo_exposed" 'BEGIN {print 0.5 * g}')" && echo 1 || echo 0)" \
  "DDP exposed communication shm $shm_exposed ms / gloo $gloo_exposed ms = $(ratio "$shm_exposed" "$gloo_exposed")x (aim <= 0.5x)"
aim "$(le "$shm_local" "$(awk -v g="$gloo_local" 'BEGIN {print 1.05 * g}')" && echo 1 || echo 0)" \
  "DDP local step shm $shm_local ms / gloo $gloo_local ms = $(ratio "$shm_local" "$gloo_local")x (aim <= 1.05x)"

# 3. libtorch DDP over the default backend against PyTorch's Python DDP: exposed <= 0.5x.
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  step torch_ddp tools/torch_ddp_bench/compare.sh --rounds=3
  dc=$(awk '/^distcomm::torch DDP/ {print $NF}' "$out/torch_ddp.txt")
  pt=$(awk '/^torch.nn.parallel DDP/ {print $NF}' "$out/torch_ddp.txt")
  aim "$(le "$dc" "$(awk -v g="$pt" 'BEGIN {print 0.5 * g}')" && echo 1 || echo 0)" \
    "libtorch DDP exposed communication distcomm $dc ms / PyTorch $pt ms = $(ratio "$dc" "$pt")x (aim <= 0.5x)"
else
  aim 0 "libtorch DDP against PyTorch: not measured (no python3-torch under /usr/bin/python3: tools/setup.sh)"
fi

# 4. shm against Open MPI: 8 B all_reduce <= 2x MPI's time; busbw >= MPI's for four ops at
#    64 KiB, 1, 16 and 64 MiB; all_reduce 64 MiB >= 0.5x a single-thread memcpy.
step shm_vs_mpi tools/bench/shm_vs_mpi.sh --rounds "$rounds" "$out/shm_vs_mpi"
while read -r op size shm_us shm_bw mpi_us mpi_bw _; do
  if [[ "$size" == 8 ]]; then
    [[ "$op" == all_reduce ]] || continue
    aim "$(le "$shm_us" "$(awk -v m="$mpi_us" 'BEGIN {print 2 * m}')" && echo 1 || echo 0)" \
      "shm 8 B all_reduce $shm_us us / Open MPI $mpi_us us = $(ratio "$shm_us" "$mpi_us")x (aim <= 2x)"
  else
    aim "$(le "$mpi_bw" "$shm_bw" && echo 1 || echo 0)" \
      "shm $op $size B busbw $shm_bw / Open MPI $mpi_bw GB/s = $(ratio "$shm_bw" "$mpi_bw")x (aim >= 1x)"
  fi
done < <(awk '$1 ~ /^(all_reduce|all_gather|reduce_scatter|broadcast)$/ && $2 ~ /^[0-9]+$/' "$out/shm_vs_mpi.txt")
memcpy=$(sed -nE 's/^# one single-thread memcpy of 64 MiB: ([0-9.]+) GB.*/\1/p' "$out/shm_vs_mpi.txt")
ar64=$(awk '$1 == "all_reduce" && $2 == 67108864 {print $4}' "$out/shm_vs_mpi.txt")
aim "$(le "$(awk -v m="$memcpy" 'BEGIN {print 0.5 * m}')" "$ar64" && echo 1 || echo 0)" \
  "shm all_reduce 64 MiB busbw $ar64 GB/s / one-thread memcpy $memcpy GB/s = $(ratio "$ar64" "$memcpy")x (aim >= 0.5x)"

# 5. init + one all_reduce at 96 ranks on this host: shm no slower than gloo (the median of
#    $rounds alternating rounds; each a whole launcher job, so process start-up counts too).
source tools/measure_build.sh
measure_build //tools/launch //examples:all_reduce >"$out/build96.txt" 2>&1 || { cat "$out/build96.txt" >&2; exit 1; }
for round in $(seq 1 "$rounds"); do
  for backend in shm gloo; do
    echo "# $(date -u +%H:%M:%S) 96 ranks, $backend, round $round (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    start=$(date +%s.%N)
    timeout 300 "$bin/tools/launch/launch" --nproc_per_node=96 "$bin/examples/all_reduce" --backend="$backend" \
      >"$out/ranks96_${backend}_$round.txt" 2>&1 || { echo "speed_gates.sh: 96 ranks over $backend failed" >&2; exit 1; }
    echo "$backend $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {print e - s}')" >>"$out/ranks96.txt"
    sleep 5  # let the 96 processes' exits settle before the next job
  done
done
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
shm96=$(awk '$1 == "shm" {print $2}' "$out/ranks96.txt" | median)
gloo96=$(awk '$1 == "gloo" {print $2}' "$out/ranks96.txt" | median)
aim "$(le "$shm96" "$gloo96" && echo 1 || echo 0)" "96 ranks, init + one all_reduce: shm $shm96 s, gloo $gloo96 s (aim: shm <= gloo)"

# 6. A program that names no backend runs auto, which is shm on one host.
DISTCOMM_DEBUG=INFO DISTCOMM_BACKEND= timeout 60 "$bin/examples/all_reduce" --nproc=2 >"$out/auto.txt" 2>&1
line=$(grep -o "group 'world' created: rank 0 of 2.*" "$out/auto.txt" | head -1)
aim "$([[ "$line" == *"backend auto (cpu: shm"* ]] && echo 1 || echo 0)" "no backend named: ${line:-no group line printed}"

echo
echo "# speed aims, $(date -u '+%Y-%m-%d %H:%M') UTC, normal priority, load average now $(cut -d' ' -f1-3 /proc/loadavg); outputs in $out/"
cat "$verdicts"
echo "speed aims: $(grep -c '^met' "$verdicts") of $(wc -l <"$verdicts") met"

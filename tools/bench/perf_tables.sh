#!/bin/bash
# Runs every measurement behind docs/performance.md and keeps the outputs:
#   tools/bench/perf_tables.sh [OUT_DIR]      (default: $TMPDIR/distcomm_bench or /tmp/...)
# - every op over gloo with 2, 3 and 4 ranks (8 B .. 64 MiB, x4), JSON per run, #wrong = 0;
# - the same over mpi under mpirun when Open MPI is here;
# - the layer's cost: gloo_overhead (separate jobs; all_reduce like for like with 2 ranks, the
#   auto algorithm against gloo's ring with 2, 3 and 4 ranks, broadcast, all_gather and
#   reduce_scatter) and mpi_overhead, 2 ranks;
# - distcomm against raw gloo and PyTorch's gloo (compare_gloo.py, when python3-torch is here);
# - busbw plots of all_reduce for both backends.
# Exits non-zero when any run fails or finds a wrong value. Numbers from a busy machine are
# noisy: the script prints the load average with each table.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-${TMPDIR:-/tmp}/distcomm_bench}"
mkdir -p "$out"
source tools/measure_build.sh
measure_build //tools/bench //tools/bench/overhead:gloo_overhead //tools/bench/overhead:mpi_overhead \
  //tools/bench/overhead:raw_gloo_bench
bench="$bin/tools/bench/bench"
ops="all_reduce all_gather reduce_scatter broadcast reduce all_to_all gather scatter send_recv barrier"
sweep=(-b 8 -e 64M -f 4)

run() {  # run NAME COMMAND...: prints the command and load, keeps the output in OUT/NAME.txt
  local name="$1"
  shift
  { echo "\$ $*"; echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"; } | tee "$out/$name.txt"
  "$@" 2>&1 | tee -a "$out/$name.txt"
}

for n in 2 3 4; do
  for op in $ops; do
    run "gloo_${op}_np$n" "$bench" --backend=gloo --op="$op" --nproc="$n" "${sweep[@]}" --json="$out/gloo_${op}_np$n.json"
  done
done

if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpi=(mpirun --oversubscribe --bind-to none --mca btl self,vader,tcp --mca pml ob1)
  for n in 2 3 4; do
    for op in $ops; do
      run "mpi_${op}_np$n" "${mpi[@]}" -np "$n" "$bench" --backend=mpi --op="$op" "${sweep[@]}" \
        --json="$out/mpi_${op}_np$n.json"
    done
  done
  run mpi_overhead "${mpi[@]}" -np 2 "$bin/tools/bench/overhead/mpi_overhead" --rounds=10
  "$bench" --plot="$out/all_reduce_np2.svg" --plot_inputs="$out/gloo_all_reduce_np2.json,$out/mpi_all_reduce_np2.json"
else
  echo "# mpirun not found: no mpi tables"
fi
overhead="$bin/tools/bench/overhead/gloo_overhead"
run gloo_overhead_ring "$overhead" --nproc=2 --rounds=5 --algorithm=ring
run gloo_overhead_bcube "$overhead" --nproc=2 --rounds=5 --algorithm=bcube
for n in 2 3 4; do
  run "gloo_overhead_auto_np$n" "$overhead" --nproc="$n" --rounds=3 --distcomm_algorithm=auto \
    --sizes=8,1K,16K,64K,256K,1M,4M,16M,64M
done
for op in broadcast all_gather reduce_scatter; do
  run "gloo_overhead_$op" "$overhead" --nproc=2 --rounds=3 --op="$op"
done
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  run compare_gloo tools/bench/compare_gloo.py --no_build --bin_dir="$bin" --nproc=2 --rounds=3
else
  echo "# no python3-torch under /usr/bin/python3: no PyTorch comparison"
fi
echo "# outputs in $out/"

#!/bin/bash
# distcomm's libtorch DDP against PyTorch's own Python DDP, same model, same machine, one run:
# torch_ddp_bench (C++, distcomm::torch::DistributedDataParallel over the default backend,
# auto: shm on one host; DISTCOMM_BACKEND=gloo for gloo) and
# torch_ddp_bench.py (torch.nn.parallel.DistributedDataParallel, gloo), as separate jobs in
# alternating rounds; the median of each column over the rounds.
#
#   tools/torch_ddp_bench/compare.sh [--rounds N] [--nproc N] [--iters N] [-- extra flags for both]
#
# The model: 8 x Linear(1024, 1024) + ReLU (8.4M parameters, 32 MiB of float32 gradients),
# batch 64 per rank, MSE loss, SGD, 25 MiB buckets, one intra-op thread per rank. Each job
# times its "local" step (the same model, no communication) alternately with its DDP step;
# exposed communication = DDP iteration - local iteration. The load average is printed with
# each run: quote a quiet run only. Needs libtorch-dev and python3-torch (tools/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=3
nproc=2
iters=20
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --nproc) nproc="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --rounds=*) rounds="${1#*=}"; shift ;;
    --nproc=*) nproc="${1#*=}"; shift ;;
    --iters=*) iters="${1#*=}"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

source tools/measure_build.sh
measure_build //tools/torch_ddp_bench
bench="$bin/tools/torch_ddp_bench/torch_ddp_bench"
common=(--nproc="$nproc" --iters="$iters" "${extra[@]}")
out="$(mktemp -d "${TMPDIR:-/tmp}/torch_ddp_compare.XXXXXX")"
results="$out/results.txt"  # impl local_ms ddp_ms exposed_ms round

field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
for round in $(seq 1 "$rounds"); do
  for impl in distcomm torch; do
    echo "# round $round: $impl (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    if [[ "$impl" == distcomm ]]; then
      "$bench" "${common[@]}" >"$out/run.txt" 2>&1 || { cat "$out/run.txt" >&2; exit 1; }
    else
      /usr/bin/python3 tools/torch_ddp_bench/torch_ddp_bench.py "${common[@]}" >"$out/run.txt" 2>&1 ||
        { cat "$out/run.txt" >&2; exit 1; }
    fi
    line=$(grep '^impl=' "$out/run.txt") || { echo "compare.sh: no result from $impl:" >&2; cat "$out/run.txt" >&2; exit 1; }
    echo "$line" | tee -a "$out/runs.txt"
    echo "$impl $(field local_ms "$line") $(field ddp_ms "$line") $(field exposed_ms "$line") $round" >>"$results"
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
col() { awk -v i="$1" -v c="$2" '$1 == i {print $c}' "$results" | median; }
echo
echo "# DDP, $nproc ranks, 8 x 1024 x 1024 MLP, batch 64 per rank, 25 MiB buckets; distcomm over ${DISTCOMM_BACKEND:-its default backend (auto)}, PyTorch over gloo; median of $rounds rounds"
printf "%-34s %10s %10s %12s\n" implementation local_ms ddp_ms exposed_ms
for impl in distcomm torch; do
  name=$([[ "$impl" == distcomm ]] && echo "distcomm::torch DDP (C++)" || echo "torch.nn.parallel DDP (Python)")
  printf "%-34s %10.1f %10.1f %12.1f\n" "$name" "$(col "$impl" 2)" "$(col "$impl" 3)" "$(col "$impl" 4)"
done
echo "# runs in $out/runs.txt"

#!/bin/bash
# DDP's exposed communication over several backends in one run: tools/ddp_bench on the same
# model for each backend, as separate jobs, in alternating rounds; the median per backend.
#
#   tools/ddp_bench/compare_backends.sh [--rounds N] [--nproc N] [--backends "shm gloo mpi"] [--iters N]
#                                       [--hosts H [--rate 1gbit]]
#
# --hosts H: the nproc ranks run on H simulated hosts (tools/netns_hosts.sh: network
# namespaces, links shaped to --rate), nproc / H each, for backends gloo and hier (root).
#
# The model: 8 Linear layers of 1024 x 1024 (ddp_bench --in_width=1024
# --layers=7 --width=1024 --out_width=1024, 8.4M parameters), batch 64 per rank, DDP's
# default 25 MiB buckets. Exposed communication is what DDP adds to an iteration: its
# iteration time minus the same step without communication (ddp_bench's "local" row, run in
# the same job), which is how ../shared/anchors/torch_ddp_bench.py measures PyTorch's DDP.
# mpi runs under mpirun. The load average is printed with each run: quote a quiet run only.
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=3
nproc=2
backends="shm gloo mpi"
iters=20
hosts=0
rate=1gbit
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --nproc) nproc="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --hosts) hosts="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "compare_backends.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if (( hosts > 0 && nproc % hosts != 0 )); then
  echo "compare_backends.sh: --nproc $nproc does not divide into --hosts $hosts hosts" >&2
  exit 2
fi
source tools/measure_build.sh
measure_build //tools/ddp_bench
bench="$bin/tools/ddp_bench/ddp_bench"
model=(--in_width=1024 --layers=7 --width=1024 --out_width=1024 --batch=64 --caps=25 --iters="$iters" --warmup=3)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out="$(mktemp -d "${TMPDIR:-/tmp}/ddp_compare.XXXXXX")"
results="$out/results.txt"  # backend local_ms ddp_ms comm_ms overlapped_percent round drift_ms sync_ms

for round in $(seq 1 "$rounds"); do
  for backend in $backends; do
    echo "# round $round: $backend (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    if (( hosts > 0 )); then
      tools/netns_hosts.sh --hosts "$hosts" --ranks_per_host $((nproc / hosts)) --rate "$rate" -- \
        "$bench" --backend="$backend" "${model[@]}" >"$out/run.txt" 2>&1
    elif [[ "$backend" == mpi ]]; then
      mpirun -np "$nproc" --oversubscribe --bind-to none --mca btl self,vader --mca pml ob1 \
        "$bench" --backend=mpi "${model[@]}" >"$out/run.txt" 2>&1
    else
      "$bench" --backend="$backend" --nproc="$nproc" "${model[@]}" >"$out/run.txt" 2>&1
    fi
    cat "$out/run.txt" >>"$out/runs.txt"
    local_ms=$(awk '/^local \(no communication\)/ {print $(NF-4)}' "$out/run.txt")
    read -r ddp_ms comm_ms overlapped < <(awk '/^DDP, bucket_cap_mb=25 / {print $4, $6, $7}' "$out/run.txt")
    if [[ -z "$local_ms" || -z "$ddp_ms" ]]; then
      echo "compare_backends.sh: no result from $backend; its output:" >&2
      cat "$out/run.txt" >&2
      exit 1
    fi
    drift_ms=$(sed -nE 's/^local steps end ([0-9.]+) ms apart.*/\1/p' "$out/run.txt")
    sync_ms=$(awk '/^local \+ barrier/ {print $(NF-4)}' "$out/run.txt")
    echo "$backend $local_ms $ddp_ms $comm_ms ${overlapped%\%} $round ${drift_ms:-0} ${sync_ms:-0}" >>"$results"
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
col() { awk -v b="$1" -v c="$2" '$1 == b {print $c}' "$results" | median; }
echo
(( hosts > 0 )) && echo "# on $hosts simulated hosts, links at $rate (tools/netns_hosts.sh)"
echo "# DDP, $nproc ranks, 8 x 1024 x 1024 MLP, batch 64 per rank, 25 MiB buckets; median of $rounds rounds"
printf "%-8s %10s %10s %12s %10s %11s %9s %12s\n" backend local_ms ddp_ms exposed_ms comm_ms overlapped drift_ms \
  ddp-sync_ms
for backend in $backends; do
  printf "%-8s %10.1f %10.1f %12.1f %10.1f %10.0f%% %9.1f %12.1f\n" "$backend" "$(col "$backend" 2)" "$(col "$backend" 3)" \
    "$(awk -v b="$backend" '$1 == b {print $3 - $2}' "$results" | median)" "$(col "$backend" 4)" "$(col "$backend" 5)" \
    "$(col "$backend" 7)" "$(awk -v b="$backend" '$1 == b {print $3 - $8}' "$results" | median)"
done
# drift_ms: how far apart the ranks' local steps (no communication) end, in the mean
# (ddp_bench's last line): a synchronous step waits that long for its slowest rank, so
# exposed communication well under it is not told apart from the host's unevenness.
# ddp-sync_ms: the DDP step minus ddp_bench's "local + barrier" step (the local one made
# synchronous, no bytes moved): what moving the gradients adds beyond that wait.
echo "# runs in $out/runs.txt"

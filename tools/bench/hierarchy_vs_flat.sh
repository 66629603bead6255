#!/bin/bash
# A hierarchical group (backend "hier": shm within each host, gloo or mpi across) against
# flat gloo, on simulated hosts joined by real, bandwidth-limited links (tools/netns_hosts.sh:
# one network namespace per host, tbf at --rate on both directions of its link).
#
#   tools/bench/hierarchy_vs_flat.sh [--hosts N] [--ranks_per_host M] [--rounds R] [--rate 1gbit]
#                                    [--op all_reduce] [--sizes "16777216 67108864"]
#                                    [--across gloo|mpi] [OUT_DIR]
#
# Each round runs tools/bench (--op, float32, sum where it reduces, root 0 where it has one;
# every size) once over "hier" and once over "gloo", each a separate job of N x M ranks, the
# order alternating from round to round; the table is the median busbw of the rounds
# (nccl-tests' formula, GB/s; sizes are the op's largest tensor), and the last line reads
#   hierarchical/flat busbw: 16M=<ratio> 64M=<ratio>
# (above it, the hier group's name, which says what went across). --across mpi: "hier" goes
# across hosts over mpi (DISTCOMM_HIER_ACROSS=mpi), its ranks started by mpirun
# (tools/netns_hosts.sh --launcher, tools/netns_rank.sh); flat gloo runs as before, and each
# round also runs flat "mpi" under mpirun: a column of its own, and above the last line
#   hierarchical/flat mpi busbw: 16M=<ratio> 64M=<ratio>
# Defaults: 2 hosts x 2 ranks, 3 rounds, 1 Gbit/s, gloo across. --sizes run as one bench
# sweep from the first to the last, multiplying by 4, so give sizes 4x apart (16M 64M, or 1M
# 4M 16M). Every run checks its results (#wrong must be 0, else this script fails). Normal
# priority, as users run; the load average is logged with each run. Needs root (network
# namespaces); --across mpi needs Open MPI's mpirun.
set -euo pipefail
cd "$(dirname "$0")/../.."

hosts=2
per_host=2
rounds=3
rate=1gbit
sizes="16777216 67108864"
op=all_reduce
across=gloo
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --ranks_per_host) per_host="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --op) op="$2"; shift 2 ;;
    --across) across="$2"; shift 2 ;;
    -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "hierarchy_vs_flat.sh: unknown flag $1 (--help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
case "$across" in
  gloo) backends=(hier gloo) ;;
  mpi)
    backends=(hier gloo mpi)
    command -v mpirun >/dev/null || { echo "hierarchy_vs_flat.sh: --across mpi needs mpirun (openmpi-bin, tools/setup.sh)" >&2; exit 2; }
    ;;
  *) echo "hierarchy_vs_flat.sh: --across must be gloo or mpi, got '$across'" >&2; exit 2 ;;
esac
out="${1:-${TMPDIR:-/tmp}/distcomm_hierarchy_vs_flat}"
mkdir -p "$out"
results="$out/results.txt"  # backend size busbw round
: >"$results"
log="$out/log.txt"
: >"$log"

source tools/measure_build.sh
measure_build //tools/bench >>"$log" 2>&1 || { echo "hierarchy_vs_flat.sh: build failed (see $log)" >&2; exit 1; }
read -r -a size_list <<<"$sizes"
min=${size_list[0]}
max=${size_list[-1]}

on_hosts() {  # backend command...: runs command as the backend's ranks on the simulated hosts
  local backend="$1"
  shift
  local netns=(tools/netns_hosts.sh --hosts "$hosts" --ranks_per_host "$per_host" --rate "$rate")
  if [[ "$backend" == mpi || ("$backend" == hier && "$across" == mpi) ]]; then
    # Under mpirun, as tests/backends/mpi runs it: more ranks than cores, unbound, ob1 (UCX or
    # OFI would probe for hardware), as root. netns_hosts.sh keeps Open MPI on its network.
    local settings=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    [[ "$backend" == hier ]] && settings+=(DISTCOMM_HIER_ACROSS=mpi)
    env "${settings[@]}" "${netns[@]}" --launcher -- \
      mpirun -np $((hosts * per_host)) --oversubscribe --bind-to none --mca pml ob1 tools/netns_rank.sh "$@"
  else
    "${netns[@]}" -- "$@"
  fi
}

run() {  # backend round
  local json="$out/$1.json"
  echo "# round $2: $1 $op, $hosts hosts x $per_host ranks at $rate (load average: $(cut -d' ' -f1-3 /proc/loadavg))" |
    tee -a "$log"
  rm -f "$json"
  on_hosts "$1" "$bin/tools/bench/bench" --backend="$1" --op="$op" -b "$min" -e "$max" -f 4 -n 5 -w 2 --json="$json" \
    >"$out/$1.out" 2>&1 || { cat "$out/$1.out" >>"$log"; echo "hierarchy_vs_flat.sh: the $1 run failed (see $log)" >&2; exit 1; }
  cat "$out/$1.out" >>"$log"
  # What the group was (over mpi or gloo across), for the table's footer.
  sed -nE 's/^# distcomm bench: [a-z_]+, backend (.*), [0-9]+ ranks, .*/\1/p' "$out/$1.out" | head -1 >"$out/$1.name"
  local size line
  for size in "${size_list[@]}"; do
    line="$(grep "\"bytes\":$size," "$json" | head -1 || true)"
    [[ -n "$line" ]] || { echo "hierarchy_vs_flat.sh: no $size-byte result from $1 (see $log)" >&2; exit 1; }
    if [[ "$(sed -E 's/.*"wrong":([0-9]+).*/\1/' <<<"$line")" != "0" ]]; then
      echo "hierarchy_vs_flat.sh: $1 got wrong values at $size bytes: $line" >&2
      exit 1
    fi
    echo "$1 $size $(sed -E 's/.*"busbw":([-0-9.e+]+).*/\1/' <<<"$line") $2" >>"$results"
  done
}

for ((r = 1; r <= rounds; r++)); do
  # Odd rounds in the order of $backends, even rounds reversed.
  order=("${backends[@]}")
  ((r % 2)) || mapfile -t order < <(printf '%s\n' "${backends[@]}" | tac)
  for backend in "${order[@]}"; do run "$backend" "$r"; done
done

python3 - "$results" "$op" "$hosts" "$per_host" "$rate" "$rounds" "$out" "${size_list[@]}" <<'EOF'
import statistics, sys
path, op, hosts, per_host, rate, rounds, out, *sizes = sys.argv[1:]
busbw = {}
for line in open(path):
    backend, size, bw, _ = line.split()
    busbw.setdefault((backend, int(size)), []).append(float(bw))
def label(size):
    size = int(size)
    return f"{size >> 20}M" if size >= 1 << 20 else f"{size >> 10}K" if size >= 1 << 10 else f"{size}B"
reduces = op in ("all_reduce", "reduce", "reduce_scatter")
print(f"{op} float32{' sum' if reduces else ''}, {hosts} hosts x {per_host} ranks, links at {rate}; busbw GB/s, median of {rounds} rounds")
mpi = any(backend == "mpi" for backend, _ in busbw)
print(f"{'size':>6} {'hier':>8} {'flat gloo':>10} {'ratio':>6}" + (f" {'flat mpi':>9} {'ratio':>6}" if mpi else ""))
ratios, mpi_ratios = [], []
for size in sizes:
    h = statistics.median(busbw[("hier", int(size))])
    g = statistics.median(busbw[("gloo", int(size))])
    ratios.append(f"{label(size)}={h / g:.2f}")
    row = f"{label(size):>6} {h:8.3f} {g:10.3f} {h / g:6.2f}"
    if mpi:
        m = statistics.median(busbw[("mpi", int(size))])
        mpi_ratios.append(f"{label(size)}={h / m:.2f}")
        row += f" {m:9.3f} {h / m:6.2f}"
    print(row)
print("hier: " + open(f"{out}/hier.name").read().strip())
if mpi:
    print("hierarchical/flat mpi busbw: " + " ".join(mpi_ratios))
print("hierarchical/flat busbw: " + " ".join(ratios))
EOF

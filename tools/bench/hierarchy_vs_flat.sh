#!/bin/bash
# A hierarchical group (backend "hier": shm within each host, gloo across) against flat
# gloo, on simulated hosts joined by real, bandwidth-limited links (tools/netns_hosts.sh:
# one network namespace per host, tbf at --rate on both directions of its link).
#
#   tools/bench/hierarchy_vs_flat.sh [--hosts N] [--ranks_per_host M] [--rounds R] [--rate 1gbit]
#                                    [--op all_reduce] [--sizes "16777216 67108864"] [OUT_DIR]
#
# Each round runs tools/bench (--op, float32, sum where it reduces, root 0 where it has one;
# every size) once over "hier" and once over "gloo", each a separate job of N x M ranks, the
# order alternating from round to round; the table is the median busbw of the rounds
# (nccl-tests' formula, GB/s; sizes are the op's largest tensor), and the last line reads
#   hierarchical/flat busbw: 16M=<ratio> 64M=<ratio>
# Defaults: 2 hosts x 2 ranks, 3 rounds, 1 Gbit/s. --sizes run as one bench sweep from the
# first to the last, multiplying by 4, so give sizes 4x apart (16M 64M, or 1M 4M 16M). Every run checks its results (#wrong
# must be 0, else this script fails). Normal priority, as users run; the load average is
# logged with each run. Needs root (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/../.."

hosts=2
per_host=2
rounds=3
rate=1gbit
sizes="16777216 67108864"
op=all_reduce
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --ranks_per_host) per_host="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --op) op="$2"; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "hierarchy_vs_flat.sh: unknown flag $1 (--help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
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

run() {  # backend round
  local json="$out/$1.json"
  echo "# round $2: $1 $op, $hosts hosts x $per_host ranks at $rate (load average: $(cut -d' ' -f1-3 /proc/loadavg))" |
    tee -a "$log"
  rm -f "$json"
  tools/netns_hosts.sh --hosts "$hosts" --ranks_per_host "$per_host" --rate "$rate" -- \
    "$bin/tools/bench/bench" --backend="$1" --op="$op" -b "$min" -e "$max" -f 4 -n 5 -w 2 --json="$json" >>"$log" 2>&1 ||
    { echo "hierarchy_vs_flat.sh: the $1 run failed (see $log)" >&2; exit 1; }
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
  if ((r % 2)); then run hier "$r"; run gloo "$r"; else run gloo "$r"; run hier "$r"; fi
done

python3 - "$results" "$op" "$hosts" "$per_host" "$rate" "$rounds" "${size_list[@]}" <<'EOF'
import statistics, sys
path, op, hosts, per_host, rate, rounds, *sizes = sys.argv[1:]
busbw = {}
for line in open(path):
    backend, size, bw, _ = line.split()
    busbw.setdefault((backend, int(size)), []).append(float(bw))
def label(size):
    size = int(size)
    return f"{size >> 20}M" if size >= 1 << 20 else f"{size >> 10}K" if size >= 1 << 10 else f"{size}B"
reduces = op in ("all_reduce", "reduce", "reduce_scatter")
print(f"{op} float32{' sum' if reduces else ''}, {hosts} hosts x {per_host} ranks, links at {rate}; busbw GB/s, median of {rounds} rounds")
print(f"{'size':>6} {'hier':>8} {'flat gloo':>10} {'ratio':>6}")
ratios = []
for size in sizes:
    h = statistics.median(busbw[("hier", int(size))])
    g = statistics.median(busbw[("gloo", int(size))])
    ratios.append(f"{label(size)}={h / g:.2f}")
    print(f"{label(size):>6} {h:8.3f} {g:10.3f} {h / g:6.2f}")
print("hierarchical/flat busbw: " + " ".join(ratios))
EOF

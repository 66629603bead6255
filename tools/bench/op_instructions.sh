#!/bin/bash
# Instructions per op, counted by valgrind's callgrind: a figure that does not move with the
# machine's load, for changes to the per-op path (issue, record, backend, wait, finish) whose
# time a shared 2-core VM cannot resolve. Runs tools/bench twice in one rank (-n 1000 and
# -n 11000, 10 warm-ups each, result checks off) and divides the difference by the 10,000
# calls between them, so that start-up and group creation cancel out.
#
#   tools/bench/op_instructions.sh [--backend shm] [--op all_reduce] [--size 8] [--nproc 1] [--top N] [--bench PATH] [OUT_DIR]
#
# Prints "instructions per <op> of <size> B on <backend>, N rank(s): N" and, with --top N, the
# N functions with the most instructions per call (inclusive, then exclusive). With --nproc 2
# or more it counts the first rank's process (under valgrind the ranks run slowly, so an op is
# still in flight when its issue returns, as between ranks on different cores), and a waiting
# rank's spin loop counts too, which depends on timing: compare the functions outside the
# wait (--top), not the total, between runs. Builds
# tools/bench with -c opt unless --bench names a binary (e.g. one built from another tree,
# for an A/B). Needs valgrind (tools/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."

backend=shm
op=all_reduce
size=8
nproc=1
top=0
bench=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --backend) backend="$2"; shift 2 ;;
    --op) op="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --nproc) nproc="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    --bench) bench="$(realpath "$2")"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "op_instructions.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
out="${1:-$(mktemp -d "${TMPDIR:-/tmp}/op_instructions.XXXXXX")}"
mkdir -p "$out"
command -v valgrind >/dev/null || { echo "op_instructions.sh: valgrind is not installed (tools/setup.sh installs it)" >&2; exit 1; }
if [[ -z "$bench" ]]; then
  source tools/measure_build.sh
  measure_build //tools/bench:bench >"$out/build.log" 2>&1 || { tail -20 "$out/build.log" >&2; exit 1; }
  bench="$bin/tools/bench/bench"
fi

# The rank's profile: spawn forks the ranks from the bench's own process, so callgrind writes
# one file per process; a rank's is one that ran run_rank, the first rank's the lowest pid.
profile() {  # calls -> path of the rank's callgrind file
  local dir="$out/n$1"
  rm -rf "$dir" && mkdir -p "$dir"
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" "$bench" --backend="$backend" --op="$op" \
    --nproc="$nproc" --sizes="$size" -c 0 -n "$1" -w 10 >"$dir/log.txt" 2>&1 ||
    { echo "op_instructions.sh: bench under valgrind failed; its output: $dir/log.txt" >&2; tail -5 "$dir/log.txt" >&2; exit 1; }
  local f
  for f in $(ls "$dir" | grep '^cg\.' | sort -t. -k2 -n); do
    if grep -q 'run_rank' "$dir/$f"; then echo "$dir/$f"; return; fi
  done
  echo "op_instructions.sh: no rank's profile among $dir/cg.*" >&2
  exit 1
}
small=$(profile 1000)
large=$(profile 11000)
total() { awk '/^summary:/ {print $2; exit} /^totals:/ {print $2; exit}' "$1"; }
per_op=$(awk -v a="$(total "$small")" -v b="$(total "$large")" 'BEGIN {printf "%.0f", (b - a) / 10000}')

if [[ "$top" -gt 0 ]]; then
  python3 - "$small" "$large" "$top" <<'EOF'
import re, subprocess, sys
small, large, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
def costs(path, inclusive):
    text = subprocess.run(["callgrind_annotate", "--inclusive=" + inclusive, "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    found = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([0-9,]+)\s+(?:\([^)]*\)\s+)?(.*)$", line)
        if m:
            name = re.sub(r"\s*\[/.*?\]$", "", m.group(2)).strip()
            found[name] = found.get(name, 0) + int(m.group(1).replace(",", ""))
    return found
for inclusive in ("yes", "no"):
    a, b = costs(small, inclusive), costs(large, inclusive)
    rows = sorted(((b[k] - a.get(k, 0)) / 10000, k) for k in b)
    print("# per call, %s:" % ("inclusive" if inclusive == "yes" else "exclusive"))
    for value, name in reversed(rows[-top:]):
        print("%8.0f  %s" % (value, name[:160]))
EOF
fi
echo "instructions per $op of $size B on $backend, $nproc rank(s): $per_op"

#!/bin/bash
# Runs ft_bench R times (each round runs its in-process, restart-path and no-failure jobs one
# after the other, so the three alternate) and prints the median of each figure per path.
#
#   tools/ft_bench/median_of_rounds.sh --rounds=5 -- --nproc=4 --backend=gloo --kill_rank=2 --kill_step=20
#
# It builds ft_bench with -c opt first. Its last line reads
#   "ft_bench medians of R rounds: recovery in-process=<s> restart=<s>; steps lost ..."
set -euo pipefail
rounds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds=*) rounds="${1#--rounds=}"; shift ;;
    --) shift; break ;;
    *) echo "median_of_rounds.sh: unknown argument '$1' (ft_bench's flags go after --)" >&2; exit 2 ;;
  esac
done
case "$rounds" in ''|*[!0-9]*) echo "median_of_rounds.sh: --rounds must be a positive number" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] || { echo "median_of_rounds.sh: --rounds must be >= 1" >&2; exit 2; }
cd "$(dirname "$0")/../.."
source tools/measure_build.sh
measure_build //tools/ft_bench >/dev/null 2>&1 || { echo "median_of_rounds.sh: build failed" >&2; exit 1; }
bench="$bin/tools/ft_bench/ft_bench"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  if ! "$bench" "$@" --json="$out/round_$r.json" >"$out/round_$r.txt" 2>&1; then
    cat "$out/round_$r.txt" >&2
    echo "median_of_rounds.sh: round $r failed" >&2
    exit 1
  fi
  echo "round $r: $(tail -n +2 "$out/round_$r.txt" | grep -E '^(recovery_s|steps_lost)' | tr -s ' ' | tr '\n' ';')"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{d}/round_{r}.json")) for r in range(1, rounds + 1)]
paths = [("in-process", lambda j: j), ("restart", lambda j: j.get("restart")), ("no failure", lambda j: j.get("no_failure"))]
fields = ["detection_s", "recovery_s", "steps_lost", "steps_per_s_before", "steps_per_s_after"]
print(f"{'median of ' + str(rounds):20s}" + "".join(f"{p:>14s}" for p, _ in paths))
medians = {}
for f in fields:
    row = f"{f:20s}"
    for p, get in paths:
        # A run without a kill has no "after" and no recovery.
        vals = [get(j)[f] for j in runs if get(j) is not None and get(j)[f] is not None and get(j)[f] >= 0
                and (get(j).get("killed") or f in ("steps_lost", "steps_per_s_before"))]
        m = statistics.median(vals) if vals else None
        medians[(p, f)] = m
        row += f"{'-' if m is None else ('%.3f' % m if isinstance(m, float) else str(m)):>14s}"
    print(row)
row = f"{'params_identical':20s}"
for p, get in paths:
    vals = [get(j)["params_identical"] for j in runs if get(j) is not None]
    row += f"{('-' if not vals else ('all' if all(vals) else 'NOT ALL')):>14s}"
print(row)
fmt = lambda v: "-" if v is None else "%.3f" % v
print(f"ft_bench medians of {rounds} rounds: recovery in-process={fmt(medians[('in-process', 'recovery_s')])} s "
      f"restart={fmt(medians[('restart', 'recovery_s')])} s; steps lost in-process={medians[('in-process', 'steps_lost')]} "
      f"restart={medians[('restart', 'steps_lost')]}")
PY

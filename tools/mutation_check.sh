#!/usr/bin/env bash
# Does the test suite notice when a core behaviour breaks? Applies deliberate bugs, one at a
# time, to a scratch copy of this working tree, runs the tests that should notice each, and
# prints which were caught. Exits 1 if any was missed (or no longer applies to the code).
#
#   tools/mutation_check.sh                 every mutation
#   tools/mutation_check.sh avg-scaling ... the named ones
#
# The copy lives in $DISTCOMM_MUTATION_DIR (default /tmp/distcomm-mutation-check) and is
# refreshed from the working tree on every run; keeping its path keeps its Bazel output
# base, so only what a mutation touches is rebuilt. The repository's user.bazelrc (a shared
# --disk_cache) is copied along. A mutation counts as caught when `bazel test` reports a
# failed test (exit code 3); a mutation that does not build is reported as such, not as caught.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${DISTCOMM_MUTATION_DIR:-/tmp/distcomm-mutation-check}"

# name | file | text to replace (exactly once) | replacement | targets and bazel flags
# One per core behaviour; the text must occur exactly once, so a mutation that no longer
# matches the code is reported instead of silently testing nothing.
mutations=(
  "reduction-result|api/reduce_op.cc|[](auto a, auto b) { return a + b; }|[](auto a, auto b) { return a; }|//tests/api:reduce_op_test //tests/api:process_group_ranks_test"
  "avg-scaling|api/ops/reduction_plan.cc|plan.divide_by = requested.kind == ReduceOp::AVG ? group_size : 1;|plan.divide_by = 1;|//tests/api:process_group_ranks_test"
  "premul-factor|api/ops/reduction_plan.cc|plan.premultiply_by = requested.kind == ReduceOp::PREMUL_SUM ? requested.factor : 1.0;|plan.premultiply_by = 1.0;|//tests/api:process_group_ranks_test"
  "reduce-scales-every-rank-in-place|api/process_group_ops.cc|Tensor input = plan.premultiplied(tensor, /*in_place=*/root);|Tensor input = plan.premultiplied(tensor, /*in_place=*/true);|//tests/api:process_group_ranks_test"
  "capability-check|api/group/group_backends.cc|return b && std::find(b->supported_ops.begin(), b->supported_ops.end(), op) != b->supported_ops.end();|return b != nullptr;|//tests/api:process_group_ranks_test //tests/api:process_group_test"
  "hash-store-timeout|api/store/hash_store.cc|const auto deadline = std::chrono::steady_clock::now() + timeout;|const auto deadline = std::chrono::steady_clock::now() + 4 * timeout;|//tests/api/store:store_test"
  "tcp-store-timeout|api/store/tcp_store.cc|const auto deadline = internal::Clock::now() + r.timeout;|const auto deadline = internal::Clock::now() + 4 * r.timeout;|//tests/api/store:store_test"
  "bucket-order|ddp/reducer.cc|buckets_[next_bucket_].pending == 0) launch(next_bucket_++);|buckets_[next_bucket_].pending == 0) launch(buckets_.size() - 1 - next_bucket_++);|//tests/ddp:ddp_hooks_test"
  "sync-buffers-root|ddp/distributed_data_parallel.cc|broadcast_coalesced(pg_, values, /*root=*/0, kBroadcastBucketBytes);|broadcast_coalesced(pg_, values, /*root=*/pg_.size() - 1, kBroadcastBucketBytes);|//tests/ddp:ddp_hooks_test"
  "launcher-exit-code|tools/launch/main.cc|return result.exit_code;|return result.exit_code ? 1 : 0;|//tests/tools/launch:launch_test"
  "gloo-p2p-tag|backends/gloo/gloo_backend.cc|sized_slot(kPointToPointSlotPrefix, static_cast<uint32_t>(tag), t.nbytes(), t.dtype())|sized_slot(kPointToPointSlotPrefix, 0u, t.nbytes(), t.dtype())|//tests/backends/gloo:gloo_conformance_test --test_filter=*PointToPoint*"
  "shm-p2p-tag|backends/shm/shm_p2p.cc|return (r.peer == src \|\| r.peer < 0) && r.tag == h.tag;|return r.peer == src \|\| r.peer < 0;|//tests/backends/shm:shm_conformance_test --test_filter=*PointToPoint*"
  "gloo-waiter-hands-off|backends/gloo/gloo_worker.cc|if (queue_.size() == 1 && caller_waits && !urgent_) {|if (false) {|//tests/backends/gloo:gloo_worker_test"
)

# Splits a table row at unescaped '|' ('\|' is a literal bar) into the array `fields`.
split_row() {
  local row="${1//\\|/$'\x01'}"
  IFS='|' read -r -a fields <<<"$row"
  local i
  for i in "${!fields[@]}"; do fields[$i]="${fields[$i]//$'\x01'/|}"; done
}

wanted=("$@")
selected() {
  [[ ${#wanted[@]} -eq 0 ]] && return 0
  local w
  for w in "${wanted[@]}"; do [[ "$w" == "$1" ]] && return 0; done
  return 1
}

# A fresh copy of the working tree (tracked and untracked files, not ignored ones).
echo "mutation_check: copying $repo to $scratch"
mkdir -p "$scratch"
find "$scratch" -mindepth 1 -maxdepth 1 ! -name '.mutation_logs' -exec rm -rf {} +
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$scratch"
[[ -f "$repo/user.bazelrc" ]] && cp "$repo/user.bazelrc" "$scratch/"
logs="$scratch/.mutation_logs"
mkdir -p "$logs"
trap '(cd "$scratch" && bazel shutdown >/dev/null 2>&1) || true' EXIT

caught=0
missed=0
results=()
for row in "${mutations[@]}"; do
  split_row "$row"
  name="${fields[0]}" file="${fields[1]}" old="${fields[2]}" new="${fields[3]}" targets="${fields[4]}"
  selected "$name" || continue
  original="$(cat "$repo/$file"; printf x)"
  original="${original%x}"
  rest="${original//"$old"/}"
  count=$(((${#original} - ${#rest}) / ${#old}))
  if [[ $count -ne 1 ]]; then
    results+=("NOT APPLIED  $name: '$old' occurs $count times in $file")
    missed=$((missed + 1))
    continue
  fi
  printf '%s' "${original/"$old"/"$new"}" >"$scratch/$file"
  echo "mutation_check: $name ($file) -> bazel test $targets"
  status=0
  # shellcheck disable=SC2086  # targets and flags are words
  (cd "$scratch" && bazel test --noshow_progress --test_output=errors $targets) >"$logs/$name.log" 2>&1 || status=$?
  printf '%s' "$original" >"$scratch/$file"
  failed_tests=$(grep -oE '^//[^ ]+ +(FAILED|TIMEOUT)' "$logs/$name.log" | awk '{print $1}' | tr '\n' ' ' || true)
  case $status in
    3) results+=("caught       $name: ${failed_tests:-a test failed}"); caught=$((caught + 1)) ;;
    0) results+=("MISSED       $name: $targets all passed"); missed=$((missed + 1)) ;;
    *) results+=("NOT RUN      $name: bazel exit code $status (build failed?), see $logs/$name.log"); missed=$((missed + 1)) ;;
  esac
done

echo
echo "mutation_check results:"
for r in "${results[@]}"; do echo "  $r"; done
echo "mutation_check: $caught caught, $missed not caught (logs in $logs)"
[[ $missed -eq 0 ]]

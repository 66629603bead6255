#!/bin/bash
# The libtorch programs end to end. examples/libtorch_mnist_like: 2 self-launched ranks print
# each epoch's loss in rank order, the loss falls, the replicas stay identical, and rank 0
# saves the model. tools/torch_ddp_bench on a tiny model: its one result line.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
model="${TEST_TMPDIR}/mnist_like.pt"

out=$("${root}/examples/libtorch_mnist_like" --nproc=2 --epochs=2 --samples=512 --batch=16 --save="${model}" 2>&1)
echo "${out}"
# Every epoch: rank 0's line, then rank 1's.
for epoch in 1 2; do
  first=$(grep -n "^\[rank 0/2\] epoch ${epoch}/2: loss " <<<"${out}" | cut -d: -f1)
  second=$(grep -n "^\[rank 1/2\] epoch ${epoch}/2: loss " <<<"${out}" | cut -d: -f1)
  [[ -n "${first}" && -n "${second}" && ${first} -lt ${second} ]] ||
    { echo "FAIL: epoch ${epoch}: no loss line per rank in rank order"; exit 1; }
done
loss1=$(sed -n 's/^\[rank 0\/2\] epoch 1\/2: loss \([0-9.]*\).*/\1/p' <<<"${out}")
loss2=$(sed -n 's/^\[rank 0\/2\] epoch 2\/2: loss \([0-9.]*\).*/\1/p' <<<"${out}")
awk -v a="${loss1}" -v b="${loss2}" 'BEGIN { exit !(b < a) }' || { echo "FAIL: the loss did not fall (${loss1} -> ${loss2})"; exit 1; }
for r in 0 1; do
  grep -q "^\[rank ${r}/2\] weights identical to rank 0's" <<<"${out}" || { echo "FAIL: rank ${r}'s replica differs"; exit 1; }
done
[[ "$(tail -n 1 <<<"${out}")" == "libtorch_mnist_like: trained on 2 ranks, model saved to ${model}" ]] ||
  { echo "FAIL: the last line is not the summary"; exit 1; }
# torch::save writes a zip archive.
[[ -s "${model}" && "$(head -c 2 "${model}")" == "PK" ]] || { echo "FAIL: no model saved at ${model}"; exit 1; }

out=$("${root}/tools/torch_ddp_bench/torch_ddp_bench" --nproc=2 --layers=2 --width=32 --batch=8 --iters=2 --warmup=1 2>&1)
echo "${out}"
grep -Eq "^impl=distcomm_torch_ddp nproc=2 params=2112 bucket_mb=25 batch=8 local_ms=[0-9.]+ ddp_ms=[0-9.]+ exposed_ms=-?[0-9.]+ .* buckets=1$" <<<"${out}" ||
  { echo "FAIL: no result line from torch_ddp_bench"; exit 1; }
echo PASS

#!/bin/bash
# The DDP example and benchmark run end to end: examples/ddp_train on 2 and 3 self-launched
# ranks (loss falls, every rank's statistics in rank order, replicas identical) and
# tools/ddp_bench on a tiny model (every row printed).
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"

for nproc in 2 3; do
  out=$("${root}/examples/ddp_train" --nproc=${nproc} --epochs=2 --samples=1024 --batch=16 2>&1)
  echo "${out}"
  loss1=$(sed -n 's/^epoch 1\/2: loss \([0-9.]*\).*/\1/p' <<<"${out}")
  loss2=$(sed -n 's/^epoch 2\/2: loss \([0-9.]*\).*/\1/p' <<<"${out}")
  awk -v a="${loss1}" -v b="${loss2}" 'BEGIN { exit !(a != "" && b != "" && b < a) }' ||
    { echo "FAIL: the loss did not fall (${loss1} -> ${loss2})"; exit 1; }
  last=$((nproc - 1))
  for r in $(seq 0 ${last}); do
    grep -q "^\[rank ${r}/${nproc}\] DDP iteration [0-9]*: .*weights identical" <<<"${out}" ||
      { echo "FAIL: no statistics line from rank ${r}"; exit 1; }
  done
  # Rank order: rank 0's line comes before the last rank's.
  first=$(grep -n "^\[rank 0/${nproc}\] DDP" <<<"${out}" | cut -d: -f1)
  final=$(grep -n "^\[rank ${last}/${nproc}\] DDP" <<<"${out}" | cut -d: -f1)
  [[ ${first} -lt ${final} ]] || { echo "FAIL: statistics not in rank order"; exit 1; }
done

# Uneven inputs through DDP's join (--uneven): ranks run 42, 22 and 2 steps per epoch; the
# joined ranks take part in the others' remaining steps (84 synchronised iterations on
# every rank over 2 epochs), the loss still falls, and every rank ends with one model.
out=$("${root}/examples/ddp_train" --nproc=3 --epochs=2 --uneven=20 2>&1)
echo "${out}"
loss1=$(sed -n 's/^epoch 1\/2: loss \([0-9.]*\).*/\1/p' <<<"${out}")
loss2=$(sed -n 's/^epoch 2\/2: loss \([0-9.]*\).*/\1/p' <<<"${out}")
awk -v a="${loss1}" -v b="${loss2}" 'BEGIN { exit !(a != "" && b != "" && b < a) }' ||
  { echo "FAIL: the loss did not fall with --uneven (${loss1} -> ${loss2})"; exit 1; }
[[ $(grep -c "DDP iteration 84: .*weights identical to the other ranks'" <<<"${out}") == 3 ]] ||
  { echo "FAIL: with --uneven, not every rank ran 84 synchronised iterations into one model"; exit 1; }

out=$("${root}/tools/ddp_bench/ddp_bench" --nproc=2 --layers=1 --width=32 --iters=2 --warmup=1 --caps=0,1,one 2>&1)
echo "${out}"
for row in "local (no communication)" "DDP, bucket_cap_mb=0 " "DDP, bucket_cap_mb=1 " "DDP, one bucket"; do
  grep -qF "${row}" <<<"${out}" || { echo "FAIL: no row '${row}'"; exit 1; }
done
echo PASS

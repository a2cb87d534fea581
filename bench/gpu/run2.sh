#!/bin/bash
# Lab run 2: final flaky_ima_user_triton measurement (+ level 3 fault trace), and the device_assert_oob
# runs again to keep the Triton kernel source named in the assertion line.
export CXX=g++
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
export TORCHINDUCTOR_COMPILE_THREADS=1
REPO=$(pwd); S=$REPO/scenarios/cuda; W=/tmp/w; C=/tmp/cache; L=/tmp/logs
NRUNS=${NRUNS:-16}; PAR=${PAR:-11}
mkdir -p $W $C $L
T0=$(date +%s); DEADLINE=$((T0 + ${BUDGET_S:-500}))
left() { echo $(( DEADLINE - $(date +%s) )); }
rj() {
  local name=$1 tag=$2 script=$3; shift 3
  local lim=$(( $(left) - 15 )); [ $lim -gt 260 ] && lim=260
  if [ $lim -lt 20 ]; then echo "skipped (deadline)" > $L/$name.log; echo 999 > $L/$name.rc; return; fi
  mkdir -p $W/$name
  local t=$(date +%s)
  ( cd $W/$name && env TORCHINDUCTOR_CACHE_DIR=$C/$tag/inductor TRITON_CACHE_DIR=$C/$tag/triton "$@" \
      timeout -k 5 $lim python3 $S/$script > $L/$name.log 2>&1; echo $? > $L/$name.rc )
  echo "$name tag=$tag rc=$(cat $L/$name.rc) secs=$(( $(date +%s) - t )) env=$*" >> $L/_jobs.txt
}
{ nvidia-smi -q | grep -iE "driver version|product name|addressing"; \
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $L/_env.txt 2>&1
L3="AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=3"; NOCACHE="PYTORCH_NO_CUDA_MEMORY_CACHING=1"

rj oob_base oob_base device_assert_oob.py &
rj oob_l3 oob_l3 device_assert_oob.py $L3 CUDA_LAUNCH_BLOCKING=1 &
(
  for i in 1 2 3 4; do
    rj ima_l3_$i ima_l3 flaky_ima_user_triton.py $L3 CUDA_LAUNCH_BLOCKING=1 $NOCACHE
    [ "$(cat $L/ima_l3_$i.rc)" != 0 ] && break
  done
) &
(
  rj ima_cold ima_base flaky_ima_user_triton.py
  n=0
  for i in $(seq 1 $NRUNS); do
    for mode in b n; do
      if [ $mode = b ]; then rj ima_b_$i ima_base flaky_ima_user_triton.py &
      else rj ima_n_$i ima_base flaky_ima_user_triton.py $NOCACHE & fi
      n=$((n+1)); if [ $n -ge $PAR ]; then wait -n; n=$((n-1)); fi
    done
  done
  wait
) &
wait

mkdir -p $L/code
for d in $C/*; do tag=$(basename $d); find $d -name '*.wrapper.cpp' | while read f; do cp $f $L/code/${tag}__$(basename $f); done; done
for j in oob_base oob_l3; do
  p=$(grep -m1 'Assertion' $L/$j.log | grep -oE '^/[^:]+\.py')
  [ -n "$p" ] && [ -f "$p" ] && cp "$p" $L/code/${j}__assert_kernel__$(basename $p) && echo "$j $p" >> $L/_assert_kernel_paths.txt
done
tar czf $OUT/run2.tar.gz -C /tmp logs

echo "=== elapsed $(( $(date +%s) - T0 ))s"; cat $L/_env.txt
sort $L/_jobs.txt | grep -v '^ima_[bn]_'
echo "=== IMA: baseline fails $(cat $L/ima_b_*.rc | grep -vc '^0$')/$(ls $L/ima_b_*.rc | wc -l), nocache fails $(cat $L/ima_n_*.rc | grep -vc '^0$')/$(ls $L/ima_n_*.rc | wc -l)"
for f in $(ls $L/ima_[bn]_*.log); do n=$(basename $f .log); echo "$(grep -m1 -oE 'reads [0-9.]+ MiB' $f | grep -oE '[0-9.]+') $n rc=$(cat $L/$n.rc) $(grep -m1 -E 'what\(\)|Error: ' $f | cut -c1-90)"; done | sort -g
for j in ima_l3_1 ima_l3_2 oob_l3; do echo "=== $j rc=$(cat $L/$j.rc 2>/dev/null)"; grep -E '^\[|Error|what\(\)' $L/$j.log 2>/dev/null | grep -v Assertion | tail -n 8 | cut -c1-250; done
cat $L/_assert_kernel_paths.txt; ls -la $L/code

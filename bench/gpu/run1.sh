#!/bin/bash
# Lab run 1 for the CUDA scenarios: every compile/run needed for deliverables A-C.
# Usage (device): bash bench/gpu/run1.sh   ($OUT must be set)
export CXX=g++
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
export TORCHINDUCTOR_COMPILE_THREADS=1
REPO=$(pwd); S=$REPO/scenarios/cuda; W=/tmp/w; C=/tmp/cache; L=/tmp/logs
NRUNS=${NRUNS:-16}; PAR=${PAR:-8}
mkdir -p $W $C $L
T0=$(date +%s); DEADLINE=$((T0 + ${BUDGET_S:-500}))
left() { echo $(( DEADLINE - $(date +%s) )); }

# rj NAME CACHETAG SCRIPT [VAR=VAL ...]: run one scenario in its own cwd with a private cache per flag set
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

{ nvidia-smi; nvidia-smi -q | grep -iE "driver version|cuda version|addressing|product name"; \
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"; \
  g++ --version | head -1; nproc; free -g; } > $L/_env.txt 2>&1

L3="AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=3"
NOCACHE="PYTORCH_NO_CUDA_MEMORY_CACHING=1"

# ---- device_assert_oob
rj oob_base oob_base device_assert_oob.py &
rj oob_l3 oob_l3 device_assert_oob.py $L3 CUDA_LAUNCH_BLOCKING=1 &

# ---- flaky IMA: cold compile, then NRUNS warm runs per setting, interleaved, PAR at a time
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
# ---- flaky IMA at level 3, CUDA_LAUNCH_BLOCKING, no caching: until one run faults (max 4)
(
  for i in 1 2 3 4; do
    rj ima_l3_$i ima_l3 flaky_ima_user_triton.py $L3 CUDA_LAUNCH_BLOCKING=1 $NOCACHE
    [ "$(cat $L/ima_l3_$i.rc)" != 0 ] && break
  done
) &
# ---- device mismatch: unchecked, then checked (same package flags -> same cache)
( rj mismatch mismatch device_mismatch.py
  rj mismatch_checked mismatch device_mismatch.py AOTI_RUNTIME_CHECK_INPUTS=1 ) &
# ---- nan_triton
rj nan_base nan_base nan_triton.py &
( rj nan_l2 nan_l2 nan_triton.py AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=2
  K=$(grep -m1 -oE 'before_launch - triton_[A-Za-z0-9_]+' $L/nan_l2.log | sed 's/before_launch - //')
  [ -z "$K" ] && K=$(grep -m1 -ohE 'triton_(poi|per|red)_[A-Za-z0-9_]+' $(find $C/nan_l2 -name '*.wrapper.cpp') 2>/dev/null)
  echo "$K" > $L/_first_triton_kernel.txt
  rj nan_l2f nan_l2f nan_triton.py AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=2 AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT=$K ) &
rj nan_l3 nan_l3 nan_triton.py $L3 &
rj nan_asserts nan_asserts nan_triton.py TORCHINDUCTOR_NAN_ASSERTS=1 &
wait

# ---- collect generated code
mkdir -p $L/code
for d in $C/*; do
  tag=$(basename $d)
  find $d -name '*.wrapper.cpp' | while read f; do cp $f $L/code/${tag}__$(basename $f); done
done
( cd $C && find . -maxdepth 5 | sort ) > $L/_cache_listing.txt
# the Triton kernel source named in the device-assert line
for j in oob_base oob_l3; do
  p=$(grep -m1 -oE '^/[^:]+\.py' $L/$j.log)
  [ -n "$p" ] && [ -f "$p" ] && cp "$p" $L/code/${j}__assert_kernel__$(basename $p) && echo "$j $p" >> $L/_assert_kernel_paths.txt
done
# pt2 listings
for f in $W/*/*.pt2; do [ -f "$f" ] && echo "== $f" && python3 -c "import zipfile,sys; [print(i.file_size, i.filename) for i in zipfile.ZipFile(sys.argv[1]).infolist()]" $f; done > $L/_pt2_listing.txt 2>&1
tar czf $OUT/run1.tar.gz -C /tmp logs

# ---- summary to stdout
echo "=== elapsed $(( $(date +%s) - T0 ))s"; cat $L/_env.txt | grep -iE "torch|addressing|driver|product"
sort $L/_jobs.txt | grep -v '^ima_[bn]_'
echo "=== IMA: baseline fails $(cat $L/ima_b_*.rc | grep -vc '^0$')/$(ls $L/ima_b_*.rc | wc -l), nocache fails $(cat $L/ima_n_*.rc | grep -vc '^0$')/$(ls $L/ima_n_*.rc | wc -l)"
for f in $(ls $L/ima_[bn]_*.log | sort -V); do n=$(basename $f .log); echo "$n rc=$(cat $L/$n.rc) $(grep -m1 -oE 'reads [0-9.]+ MiB past|table=0x[0-9a-f]+' $f | tr '\n' ' ') $(grep -m1 -E 'Error|error:' $f | cut -c1-110)"; done
for j in oob_base oob_l3 ima_cold ima_l3_1 mismatch mismatch_checked nan_base nan_l2f nan_l3 nan_asserts; do
  echo "=== $j rc=$(cat $L/$j.rc 2>/dev/null)"; grep -vE 'Assertion|^\s|FutureWarning|UserWarning|warnings.warn|return cls' $L/$j.log | tail -n 8 | cut -c1-300
done
echo "=== first triton kernel: $(cat $L/_first_triton_kernel.txt)"; grep -m2 Assertion $L/oob_l3.log | cut -c1-250
cat $L/_assert_kernel_paths.txt; ls -la $L/code | head -30

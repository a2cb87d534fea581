# Issue #17 on the lent GPU: `start` runs bench/reuse_gpu.py in its own session (it outlives this call), `wait`
# waits for it; both copy what it printed so far, and the ladders' reports, to $OUT. JOBS=N: --jobs (4).
set -u
export CXX=g++ CUDA_HOME=/usr/local/cuda PYTHONPATH=$PWD PYTHONUNBUFFERED=1
w=/tmp/bench
if [ "$1" = start ]; then
  rm -rf $w; mkdir -p $w
  setsid nohup python3 bench/reuse_gpu.py --jobs ${JOBS:-4} --skip-off --keep $w/keep --scenarios "$2" > $w/out.txt 2>&1 < /dev/null &
fi
end=$((SECONDS + ${WAIT:-570}))
while pgrep -f "bench/reuse_gpu.py" >/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
cp $w/out.txt $OUT/ 2>/dev/null
# Each run's result.json and hook.json too: the per-run times and reuse outcomes the timeline is read from.
cd $w/keep 2>/dev/null && find . -path '*/cache' -prune -o \( -name 'report.*' -o -name 'ladder-*.log' \
  -o -name result.json -o -name 'hook*.json' \) -print | tar czf $OUT/reports.tar.gz -T - 2>/dev/null
cat $w/out.txt

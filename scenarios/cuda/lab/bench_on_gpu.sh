# Issue #17 on the lent GPU: `start` runs bench/reuse_gpu.py in its own session (it outlives this call), `wait`
# waits for it; both copy what it printed so far, and the flaky ladder's report, to $OUT.
set -u
export CXX=g++ CUDA_HOME=/usr/local/cuda PYTHONPATH=$PWD PYTHONUNBUFFERED=1
w=/tmp/bench
if [ "$1" = start ]; then
  rm -rf $w; mkdir -p $w
  setsid nohup python3 bench/reuse_gpu.py --jobs 4 --skip-off --keep $w/keep --scenarios "$2" > $w/out.txt 2>&1 < /dev/null &
fi
end=$((SECONDS + ${WAIT:-570}))
while pgrep -f "bench/reuse_gpu.py" >/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
cp $w/out.txt $OUT/ 2>/dev/null
cd $w/keep 2>/dev/null && tar czf $OUT/reports.tar.gz $(find . -maxdepth 3 -name "report.*" -o -maxdepth 3 -name "ladder-*.log" -o -maxdepth 5 -name result.json) 2>/dev/null
cat $w/out.txt

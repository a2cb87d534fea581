#!/usr/bin/env bash
# Issue #28 on the lent GPU: `start` runs bench/verdict.py over the CUDA scenarios (JOBS, default: the tool's own, PARALLEL bisections
# at once) and RATE_RUNS baseline runs of rare_ima_user_triton (its crash rate, with its 95% interval), each in its own session so that the
# work outlives one device call; `wait` waits for them. Both copy what exists to $OUT: verdict.txt, rate.txt and
# the reports (report.json/md of each bisection). MINIFY=NAME also bisects that CUDA
# scenario (stages baseline, trace, inspect) beside them and then minifies it (issue #31) within MINIFY_BUDGET seconds,
# keeping its minify/ folder (minify.txt, minify.tar.gz). BUDGET: verdict.py's --budget; VERDICT_ARGS: more of its options (--tool-max-runs).
# CXX=g++: the image's default compiler makes every AOTI package segfault on load (docs/gpu.md).
set -u
export CXX=g++ CUDA_HOME=/usr/local/cuda PYTHONPATH=$PWD PYTHONUNBUFFERED=1
w=/tmp/verdict
collect() {
  cp $w/verdict.txt $w/rate.txt $w/device.txt $OUT/ 2>/dev/null
  cp $w/rate/report.json $OUT/rate-report.json 2>/dev/null
  cp $w/minify.txt $OUT/ 2>/dev/null
  [ -d $w/min ] && tar czf $OUT/minify.tar.gz -C $w/min --exclude=cache --exclude=cwd --exclude=tmp \
     --exclude='*.so' --exclude='*.o' --exclude='*.bin' --exclude='*.pt2' --exclude='*.cubin' report.json report.md \
     minify 2>/dev/null
  (cd $w/keep 2>/dev/null && find . -maxdepth 2 \( -name 'report.json' -o -name 'report.md' \) -print |
     tar czf $OUT/reports.tar.gz -T -) 2>/dev/null
  # Each run's result.json (its phases, warm or cold, peaks): `python bench/phases.py FOLDER` summarises them.
  (cd $w/keep 2>/dev/null && find . -path '*/runs/*/result.json' -print | tar czf $OUT/results.tar.gz -T -) 2>/dev/null
  cat $w/device.txt $w/rate.txt $w/verdict.txt 2>/dev/null
}
if [ "${1:-wait}" = start ]; then
  rm -rf $w; mkdir -p $w/keep $w/rate
  { python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))";
    $CUDA_HOME/bin/compute-sanitizer --version | tail -n 1; nproc; } > $w/device.txt 2>&1
  setsid nohup python3 bench/verdict.py --jobs "${JOBS:-0}" --parallel "${PARALLEL:-3}" --keep $w/keep --budget "${BUDGET:-300}" \
    ${SCENARIOS:+--scenarios $SCENARIOS} ${VERDICT_ARGS:-} > $w/verdict.txt 2>&1 < /dev/null &
  if [ -n "${MINIFY:-}" ]; then
    setsid nohup sh -c "python3 -m aoti_bisect scenarios/cuda/$MINIFY.py --stages baseline,trace,inspect --runs 1 \
      --jobs 4 --out $w/min; python3 -m aoti_bisect minify $w/min --jobs 4 --budget ${MINIFY_BUDGET:-900}" \
      > $w/minify.txt 2>&1 < /dev/null &
  fi
  if [ "${RATE_RUNS:-0}" -gt 0 ]; then
    setsid nohup python3 -m aoti_bisect scenarios/cuda/rare_ima_user_triton.py --runs "$RATE_RUNS" \
      --max-runs "$RATE_RUNS" --stages baseline --jobs "${RATE_JOBS:-4}" --timeout 400 --out $w/rate \
      > $w/rate.txt 2>&1 < /dev/null &
  fi
fi
end=$((SECONDS + ${WAIT:-560}))
while pgrep -f "bench/verdict.py|aoti_bisect scenarios/cuda/" >/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
collect

#!/usr/bin/env bash
# bench/verdict.py over the CUDA scenarios on a host of several GPUs, one group of scenarios per GPU: group g runs
# on GPU g alone (CUDA_VISIBLE_DEVICES) and on its own CORES cores (taskset), PARALLEL bisections at once, so that
# each group measures what one GPU with CORES cores does (nvidia-h100-x1 has 16). GROUP0, GROUP1, ...: the
# scenarios of each group, comma-separated. `start` starts the groups in sessions of their own (so that the work
# outlives one device call) and waits; `wait` waits again. Both copy to $OUT: verdict.txt (every group's table,
# machine line first), device.txt, and reports.tar.gz (each bisection's report.json/md, every run's result.json and
# each instrumented copy's build logs, whose times give the bisection's timeline, and from every run that crashed
# its cuda-gdb.log and crash-stack.txt; never a core dump).
# CXX=/usr/bin/g++: the image's default compiler makes every AOTI package segfault on load (docs/gpu.md).
set -u
export CXX=/usr/bin/g++ CUDA_HOME=/usr/local/cuda PYTHONPATH=$PWD PYTHONUNBUFFERED=1
w=/tmp/verdict-groups
cores=${CORES:-16}
collect() {
  cat $w/device.txt $w/verdict*.txt > $OUT/verdict.txt 2>/dev/null
  cp $w/device.txt $OUT/ 2>/dev/null
  (cd $w && find . \( -name report.json -o -name report.md -o -name cuda-gdb.log -o -name crash-stack.txt \
     -o -name result.json -o -path '*/prebuilt/*.log' \) -not -path '*/cache/*' -print | tar czf $OUT/reports.tar.gz -T -) \
     2>/dev/null
  cat $OUT/verdict.txt
}
if [ "${1:-wait}" = start ]; then
  rm -rf $w; mkdir -p $w
  # The device tool copies the working tree afresh at every call: work that outlives this call runs from a copy,
  # or a later call deletes the folder it works in (a process without its working folder dies at `import torch`).
  rm -rf $w-src; cp -r "$PWD" $w-src; cd $w-src; export PYTHONPATH=$PWD
  { nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)";
    $CUDA_HOME/bin/compute-sanitizer --version | tail -n 1; $CUDA_HOME/bin/cuda-gdb --version | head -n 1;
    nproc; echo "commit $(git rev-parse --short HEAD 2>/dev/null || cat COMMIT)"; date -u; } > $w/device.txt 2>&1
  g=0
  while v="GROUP$g"; [ -n "${!v:-}" ]; do
    mkdir -p $w/g$g
    CUDA_VISIBLE_DEVICES=$g setsid nohup taskset -c $((g * cores))-$((g * cores + cores - 1)) \
      python3 bench/verdict.py --jobs 4 --parallel "${PARALLEL:-3}" --keep $w/g$g --budget "${BUDGET:-60}" \
      --scenarios "${!v}" > $w/verdict$g.txt 2>&1 < /dev/null &
    g=$((g + 1))
  done
fi
end=$((SECONDS + ${WAIT:-540}))
while pgrep -f "bench/verdict.py" >/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
collect

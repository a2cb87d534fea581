#!/usr/bin/env bash
# Issue #18 on the lent GPU: the memcheck stage on the masked and the flaky user-Triton scenarios.
# `start` launches both bisections with setsid (so they can outlive one device call) and waits up to
# $2 seconds; `wait` waits again. Both pack the run folders (caches and scratch left out) into
# $OUT/memcheck-check.tar.gz. CXX=g++: the image's default compiler makes every AOTI package segfault on load.
set -u
export CXX=g++ PYTHONPATH=$PWD PYTHONUNBUFFERED=1
work=/tmp/aoti-memcheck-check
san=/usr/local/cuda/bin/compute-sanitizer
pack() {
  tar czf "$OUT/memcheck-check.tar.gz" -C "$work" --exclude=cache --exclude=cwd --exclude=tmp . 2>/dev/null
  for f in "$work"/*.txt; do echo "== $f"; tail -n 25 "$f"; done
}
wait_all() {
  local deadline=$((SECONDS + $1))
  while pgrep -f "python3 -m aoti_bisect" >/dev/null && [ $SECONDS -lt $deadline ]; do sleep 5; done
}
case "${1:-start}" in
start)
  rm -rf "$work"; mkdir -p "$work"
  { python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))";
    $san --version | tail -n 1; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } \
    > "$work/device.txt" 2>&1
  cat "$work/device.txt"
  setsid nohup python3 -m aoti_bisect scenarios/cuda/masked_oob_user_triton.py --runs 2 --max-runs 2 --jobs 2 \
    --sanitizer $san --timeout 400 --out "$work/masked" > "$work/masked.txt" 2>&1 < /dev/null &
  setsid nohup python3 -m aoti_bisect scenarios/cuda/flaky_ima_user_triton.py --runs 4 --max-runs 4 --jobs 4 \
    --sanitizer $san --timeout 400 --out "$work/flaky" > "$work/flaky.txt" 2>&1 < /dev/null &
  wait_all "${2:-540}"; pack ;;
masked)  # the masked scenario again (after a change), beside whatever still runs
  rm -rf "$work/masked"
  setsid nohup python3 -m aoti_bisect scenarios/cuda/masked_oob_user_triton.py --runs 2 --max-runs 2 --jobs 2 \
    --sanitizer $san --timeout 400 --out "$work/masked" > "$work/masked.txt" 2>&1 < /dev/null &
  wait_all "${2:-540}"; pack ;;
wait)
  wait_all "${2:-540}"; pack ;;
esac

#!/usr/bin/env bash
# How the CUDA scenarios were checked on the lent GPU: `aoti-bisect scenarios check` per scenario, in
# parallel, started with setsid so that the work can outlive one device call (`start [NAME...]`); a second
# call (`wait`) waits for it. Both pack what exists into $OUT/gpu-check.tar.gz (caches and run dirs' scratch
# left out). CXX=g++: the image's default compiler makes every AOTI package segfault on load.
# CUDA_HOME: where the memcheck stage finds compute-sanitizer. JOBS_<name>=N overrides --jobs 2.
# RATES=N (issue #17) also measures flaky_ima_user_triton's baseline rate over N runs both ways, side by side:
# every run compiling, as the user runs it (--reuse none), and one compile reused by the rest (--reuse all).
set -u
export CXX=g++ PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
work=/tmp/aoti-gpu-check
pack() {
  tar czf "$OUT/gpu-check.tar.gz" -C "$work" --exclude=cache --exclude=cwd --exclude=tmp --exclude=inductor \
    --exclude='*.so' --exclude='*.o' --exclude='*.bin' --exclude='*.pt2' . 2>/dev/null
  # The packages the scenarios' setups built, whole: real CUDA packages for the CPU tests to read.
  (cd "$work" && find . -path '*/setup/*' -name '*.pt2' | tar czf "$OUT/packages.tar.gz" -T -) 2>/dev/null
  tail -n 30 "$work"/*.txt
}
wait_all() {
  local deadline=$((SECONDS + $1))
  while pgrep -f "python3 -m aoti_bisect" >/dev/null && [ $SECONDS -lt $deadline ]; do sleep 5; done
}
case "${1:-start}" in
start)
  shift || true
  names=("$@")
  [ ${#names[@]} -gt 0 ] || names=(device_assert_oob device_mismatch nan_triton flaky_ima_user_triton)
  rm -rf "$work"; mkdir -p "$work"
  { python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))";
    "$CUDA_HOME/bin/compute-sanitizer" --version | tail -n 1; } > "$work/device.txt" 2>&1
  cat "$work/device.txt"
  for s in "${names[@]}"; do
    jobs_var="JOBS_$s"
    setsid nohup python3 -m aoti_bisect scenarios check "$s" --device cuda --jobs "${!jobs_var:-2}" \
      --out "$work/$s" > "$work/$s.txt" 2>&1 < /dev/null &
  done
  for mode in ${RATES:+none all}; do
    setsid nohup python3 -m aoti_bisect run scenarios/cuda/flaky_ima_user_triton.py --runs "$RATES" \
      --max-runs "$RATES" --stages baseline --jobs "${RATE_JOBS:-6}" --reuse "$mode" --timeout 400 \
      --out "$work/rate-$mode" > "$work/rate-$mode.txt" 2>&1 < /dev/null &
  done
  wait_all "${WAIT:-540}"; pack ;;
wait)
  wait_all "${WAIT:-540}"; pack ;;
esac

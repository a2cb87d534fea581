#!/usr/bin/env bash
# Issue #18: compute-sanitizer output for the parser tests, three cases in parallel, each in its own folder:
# a device-side assert under memcheck (scenarios/cuda/device_assert_oob.py), an out-of-bounds read in an
# Inductor-generated Triton kernel, an out-of-bounds write in a user Triton kernel. Logs land in $OUT.
set -u
export CXX=g++ PYTHONUNBUFFERED=1
san=/usr/local/cuda/bin/compute-sanitizer
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=/tmp/sanitizer-captures; rm -rf $work; mkdir -p $work
run() {  # name script
  mkdir -p $work/$1 && cd $work/$1 && \
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 TORCHINDUCTOR_CACHE_DIR=$work/$1/cache timeout 500 \
    $san --tool memcheck --print-limit 100 --show-backtrace no python3 "$2" > "$OUT/$1.log" 2>&1
  echo "$1: rc $?" >> "$OUT/rc.txt"
}
run device_assert_memcheck "$root/scenarios/cuda/device_assert_oob.py" &
run inductor_kernel_oob_memcheck "$here/inductor_kernel_oob.py" &
run user_kernel_oob_write_memcheck "$here/user_kernel_oob_write.py" &
wait
{ python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"; $san --version | tail -n 1; } >> "$OUT/rc.txt" 2>&1
cat "$OUT/rc.txt"; for f in "$OUT"/*.log; do echo "== $f"; grep "=========" "$f" | head -12; done

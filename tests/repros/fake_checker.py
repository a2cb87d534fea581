"""Stands in for a memory checker in the nightly tests (the real ones are proven in test_sanitizer, test_memcheck
and test_e2e): installed as an executable named `valgrind` (on PATH) or `compute-sanitizer` (--sanitizer PATH),
it runs the repro it is given after the checker's own options, then writes that checker's report to its
--log-file (printed, where none is given).

FAKE_CHECKER_FINDS names the function of one invalid read to report (none: a clean report);
FAKE_CHECKER_REFUSE makes it refuse the process instead."""
import os
import subprocess
import sys

# compute-sanitizer options taking a value
VALUE_OPTIONS = {"--tool", "--print-limit", "--show-backtrace", "--padding", "--log-file"}

args = sys.argv[1:]
i = 0
while i < len(args) and args[i].startswith("-"):
    i += 2 if args[i] in VALUE_OPTIONS else 1
repro = args[i:]
# The report goes where the real checkers send it: --log-file (valgrind: --log-file=PATH), never stdout.
log_file = next((a.split("=", 1)[1] for a in args[:i] if a.startswith("--log-file=")), None) or next(
    (args[j + 1] for j in range(i) if args[j] == "--log-file"), None)
valgrind = os.path.basename(sys.argv[0]) == "valgrind"
env = "PYTHONMALLOC" if valgrind else "PYTORCH_NO_CUDA_MEMORY_CACHING"
print(f"fake checker: {env}={os.environ.get(env)} options={' '.join(args[:i])}", flush=True)
if os.environ.get("FAKE_CHECKER_REFUSE"):
    print("==7== valgrind: failed to start tool 'memcheck' for platform 'amd64-linux'" if valgrind
          else "========= Error: Device not supported", flush=True)
    sys.exit(1)
code = subprocess.run(repro).returncode
if log_file:
    sys.stdout.flush()
    sys.stdout = open(log_file, "w")
func = os.environ.get("FAKE_CHECKER_FINDS")
if valgrind:
    if func:
        print(f"==7== Invalid read of size 4\n==7==    at 0x4A2B3C: {func} (oob.cpp:12)\n"
              "==7==  Address 0x1ffe0 is 0 bytes after a block of size 64 alloc'd")
    print(f"==7== ERROR SUMMARY: {2 if func else 0} errors from {1 if func else 0} contexts (suppressed: 0 from 0)")
    sys.exit(99 if func else code)
if func:
    print(f"========= Invalid __global__ read of size 4 bytes\n=========     at {func}+0x1b0 in oob.cu:12\n"
          "=========     by thread (3,0,0) in block (0,0,0)\n"
          "=========     Access to 0x7f0000000100 is out of bounds")
print(f"========= ERROR SUMMARY: {1 if func else 0} error{'' if func else 's'}")
sys.exit(code)

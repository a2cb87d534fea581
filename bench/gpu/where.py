"""Runs a script with faulthandler dumping every thread's stack each $WHERE_EVERY s (4) into $TB: where does a
run's time go?"""
import faulthandler, os, runpy, sys, time, atexit
f = open(os.environ["TB"], "w")
t0 = time.time()
faulthandler.dump_traceback_later(float(os.environ.get("WHERE_EVERY", "4")), repeat=True, file=f)
atexit.register(lambda: print(f"[where] atexit reached at {time.time()-t0:.1f}s", file=sys.stderr, flush=True))
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    print(f"[where] script body ended at {time.time()-t0:.1f}s", file=sys.stderr, flush=True)

#!/usr/bin/env bash
# Issue #39 (and #37) on the lent GPU. `start` launches, in a session of its own (setsid, so that the work outlives
# one device call), one driver that:
#   1. bisects scenarios/cuda/flaky_ima_user_triton.py (a user Triton kernel defined in the repro's Python reads
#      past its table: a flaky illegal memory access) with the stages docs/minify.md names
#      (baseline,sanity,trace) and --jobs 4, and beside it checks the CUDA twin of issue #37,
#      prebuilt_named_inputs_cuda, against the manifest (`aoti-bisect scenarios check`);
#   2. once the bisection is done, `aoti-bisect minify RUN_DIR` (its default --jobs, or MINIFY_JOBS), timed (date stamps and /usr/bin/time -v);
#   3. copies minify/repro.py, inputs.pt (and any library minify put beside them, *.so) alone into an empty
#      folder and runs `python repro.py` there (no PYTHONPATH, a fresh compile cache) up to ALONE_RUNS times (the
#      first compiles, the later ones `--reuse`, as minify's own check does), stopping at the first illegal
#      memory access;
#   4. writes minify-summary.txt: machine, torch, date, commit, the minify's seconds and exit code, nodes before
#      and after (minify/minify.json), the alone run's exit code and its failure as aoti-bisect classifies it
#      (an illegal memory access, whichever of CUDA's words for it the run printed),
#      and the twin's check line.
# `start` then waits up to WAIT seconds (default 560) and collects; `wait` waits again and collects. Collect
# copies to $OUT: minify-summary.txt, device.txt, every step's log (*.txt), minify.json, repro.py, the alone
# runs' logs, the bisection's and the twin's report.md/json, and minify.tar.gz (the minify folder without caches
# or binaries). A step that fails is logged and the next ones still run; the summary is always written.
# CXX=/usr/bin/g++ for every process (the tool's children inherit it): the image's default compiler builds
# packages that segfault on load (docs/gpu.md), the likely cause of the load-phase segfault that ended an earlier
# try of this minify in its baseline.
# Knobs: WAIT, MINIFY_BUDGET (minify's --budget, default 540), MINIFY_JOBS, MINIFY_ARGS (more minify options, e.g.
# --max-runs 4), ALONE_RUNS (default 3), TWIN=0 (no twin);
# SCENARIO, TWIN_NAME and DEVICE=cpu run the same steps on a CPU analogue (how the script was tried without a GPU:
# SCENARIO=scenarios/cpu/flaky_python_op_oob.py TWIN_NAME=prebuilt_named_inputs DEVICE=cpu).
set -u
: "${OUT:=/tmp/minify-gpu-out}"; mkdir -p "$OUT"
export CXX=/usr/bin/g++ CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD \
  PYTHONUNBUFFERED=1
w=/tmp/minify-gpu
scenario=${SCENARIO:-scenarios/cuda/flaky_ima_user_triton.py}
twin=${TWIN_NAME:-prebuilt_named_inputs_cuda}

stamp() { echo "$(date -u +%FT%TZ) $*" >> $w/steps.txt; }

summary() {
  local j=$w/run/minify/minify.json
  {
    echo "# bench/gpu/minify_on_gpu.sh (issue #39: minify a user-Triton-kernel IMA; issue #37: $twin)"
    echo "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), $(nproc) cores"
    echo "torch: $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1)"
    echo "date: $(cat $w/started 2>/dev/null) .. $(date -u +%FT%TZ)"
    # A snapshot's COMMIT (git archive of a commit) first: the lent machine's copy of the tree holds a .git above the
    # snapshot whose HEAD need not be the snapshot's.
    echo "commit: $(cat COMMIT 2>/dev/null || { git rev-parse --short HEAD; git diff --quiet HEAD || echo ' (+ uncommitted changes)'; } 2>/dev/null | tr -d '\n')"
    echo "CXX: $CXX ($($CXX --version 2>/dev/null | head -n 1))"
    echo "bisect: exit $(cat $w/bisect.rc 2>/dev/null || echo none), $(cat $w/bisect.seconds 2>/dev/null || echo ?) s; $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sig, c, rep = r.get("signature") or {}, r.get("culprit") or {}, r.get("reproduction") or {}
print("verdict", r.get("verdict"), "kind", sig.get("kind"), "phase", sig.get("phase"), "culprit",
      c.get("kind"), c.get("kernel") or c.get("op") or "", "baseline", str(rep.get("failures")) + "/" + str(rep.get("runs")),
      "CXX in the runs", ((r.get("environment") or {}).get("env") or {}).get("CXX"))
' $w/run/report.json 2>/dev/null || echo 'no report.json')"
    echo "minify: exit $(cat $w/minify.rc 2>/dev/null || echo none), wall $(cat $w/minify.seconds 2>/dev/null || echo ?) s (limit 360 s); $(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
rate = m.get("repro_failure_rate") or {}
print("status", m.get("status"), "nodes", m.get("nodes_before"), "->", m.get("nodes_after"), "(limit 3)",
      "ops", m.get("ops_after"), "candidates", m.get("candidates"), "seconds", m.get("seconds"),
      "verified", m.get("verified"), "alone in minify", str(rate.get("failures")) + "/" + str(rate.get("runs")),
      "jobs", m.get("jobs"), "steps", m.get("step_seconds"), "verify runs", m.get("verify_run_seconds"))
' $j 2>/dev/null || echo 'no minify.json')"
    echo "nodes_after: $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("nodes_after"))' $j 2>/dev/null || echo none)"
    echo "repro alone (files copied: $(cat $w/alone.files 2>/dev/null)):"
    sed 's/^/  /' $w/alone.result 2>/dev/null || echo "  not run"
    echo "twin $twin: exit $(cat $w/twin.rc 2>/dev/null || echo 'none (still running or not run)'), $(cat $w/twin.seconds 2>/dev/null || echo ?) s; $(grep "^| $twin" $w/twin/scenarios-check.md 2>/dev/null || grep -E "scenario $twin: (ok|MISMATCH)" $w/twin.txt 2>/dev/null | tail -n 1)"
    echo "steps:"; sed 's/^/  /' $w/steps.txt 2>/dev/null
  } > $w/minify-summary.txt 2>&1
}

collect() {
  summary
  cp $w/minify-summary.txt $w/device.txt $w/steps.txt $w/*.txt $OUT/ 2>/dev/null
  mkdir -p $OUT/alone $OUT/bisect $OUT/twin
  cp $w/alone-*.log $OUT/alone/ 2>/dev/null
  cp $w/alone/repro.py $OUT/alone/ 2>/dev/null
  cp $w/run/minify/minify.json $w/run/minify/repro.py $OUT/ 2>/dev/null
  cp $w/run/report.json $w/run/report.md $OUT/bisect/ 2>/dev/null
  cp $w/twin/scenarios-check.json $w/twin/scenarios-check.md $OUT/twin/ 2>/dev/null
  cp $w/twin/$twin/report.json $w/twin/$twin/report.md $OUT/twin/ 2>/dev/null
  cp $w/twin/setup/$twin/setup.log $OUT/twin/ 2>/dev/null
  [ -d $w/run/minify ] && tar czf $OUT/minify.tar.gz -C $w/run --exclude=cache --exclude=cwd --exclude=tmp \
    --exclude='*.so' --exclude='*.o' --exclude='*.bin' --exclude='*.pt2' --exclude='*.cubin' minify 2>/dev/null
  cat $w/minify-summary.txt
}

drive() {
  date -u +%FT%TZ > $w/started
  { nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))";
    compute-sanitizer --version | tail -n 1; nproc; echo "CXX=$CXX: $($CXX --version | head -n 1)";
    echo "commit $(cat COMMIT 2>/dev/null || git rev-parse --short HEAD)"; date -u; } > $w/device.txt 2>&1
  # aoti-bisect runs from the checkout (PYTHONPATH); install it only where its requirements are missing (no
  # network on the device: --no-deps --no-build-isolation, so that only the checkout itself is installed).
  if ! python3 -c "import aoti_bisect.cli, click, psutil, tabulate" >> $w/install.txt 2>&1; then
    stamp "installing the checkout (pip install --no-deps --no-build-isolation -e .)"
    python3 -m pip install -q --no-deps --no-build-isolation -e . >> $w/install.txt 2>&1 || stamp "pip install failed"
  fi

  if [ "${TWIN:-1}" != 0 ]; then
    stamp "twin $twin: start"
    ( t=$SECONDS; python3 -m aoti_bisect scenarios check $twin --device "${DEVICE:-cuda}" --jobs 4 --out $w/twin \
        > $w/twin.txt 2>&1 < /dev/null; echo $? > $w/twin.rc; echo $((SECONDS - t)) > $w/twin.seconds
      stamp "twin $twin: exit $(cat $w/twin.rc) after $(cat $w/twin.seconds) s" ) &
  fi

  stamp "bisect $scenario: start"
  t=$SECONDS
  python3 -m aoti_bisect run $scenario --stages baseline,sanity,trace --jobs 4 --budget 0 --timeout 400 \
    --out $w/run > $w/bisect.txt 2>&1 < /dev/null
  echo $? > $w/bisect.rc; echo $((SECONDS - t)) > $w/bisect.seconds
  stamp "bisect: exit $(cat $w/bisect.rc) after $(cat $w/bisect.seconds) s (1 = reproduced)"

  stamp "minify: start (twin still running: $([ -f $w/twin.rc ] || [ "${TWIN:-1}" = 0 ] && echo no || echo yes))"
  t=$SECONDS
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -v -o $w/minify-time.txt python3 -m aoti_bisect minify $w/run ${MINIFY_JOBS:+--jobs $MINIFY_JOBS} \
      --budget "${MINIFY_BUDGET:-540}" ${MINIFY_ARGS:-} > $w/minify.txt 2>&1 < /dev/null
  else
    python3 -m aoti_bisect minify $w/run ${MINIFY_JOBS:+--jobs $MINIFY_JOBS} --budget "${MINIFY_BUDGET:-540}" ${MINIFY_ARGS:-} \
      > $w/minify.txt 2>&1 < /dev/null
  fi
  echo $? > $w/minify.rc; echo $((SECONDS - t)) > $w/minify.seconds
  stamp "minify: exit $(cat $w/minify.rc) after $(cat $w/minify.seconds) s (0 = minified and verified)"
  summary

  # The reduced repro alone: repro.py, inputs.pt and the libraries beside them, nothing else, in an empty
  # folder; no PYTHONPATH (it must not need aoti-bisect), its own fresh compile cache. CXX stays /usr/bin/g++.
  rm -rf $w/alone $w/alone-cache; mkdir -p $w/alone $w/alone-cache
  if [ -f $w/run/minify/repro.py ]; then
    cp $w/run/minify/repro.py $w/alone/
    [ -f $w/run/minify/inputs.pt ] && cp $w/run/minify/inputs.pt $w/alone/
    for lib in $w/run/minify/*.so; do [ -f "$lib" ] && cp "$lib" $w/alone/; done
    ls $w/alone | tr '\n' ' ' > $w/alone.files
    stamp "alone: files $(cat $w/alone.files)"
    : > $w/alone.result
    for i in $(seq 1 "${ALONE_RUNS:-3}"); do
      reuse=; [ $i -gt 1 ] && reuse=--reuse
      t=$SECONDS
      (cd $w/alone && env -u PYTHONPATH PYTHONFAULTHANDLER=1 TORCHINDUCTOR_CACHE_DIR=$w/alone-cache/inductor \
         TRITON_CACHE_DIR=$w/alone-cache/triton timeout -k 10 400 python3 repro.py $reuse \
         > $w/alone-$i.log 2>&1 < /dev/null)
      rc=$?
      # The failure's kind as aoti-bisect classifies it: CUDA words an invalid access several ways ("an illegal
      # memory access was encountered", "operation not supported on global/shared address space", ...).
      kind=$(python3 -c 'import sys; from aoti_bisect.run.classify import classify; from aoti_bisect.run.types import ProcessExit
text = open(sys.argv[1], errors="replace").read(); _, sig = classify(text, ProcessExit(int(sys.argv[2]), None, False, 0.0, len(text)))
print(f"{sig.kind}/{sig.phase}: {sig.message[:200]}" if sig else "passed")' $w/alone-$i.log $rc 2>&1 | tail -n 1)
      ima=no; case "$kind" in illegal_memory_access/*) ima=yes ;; esac
      stamp "alone run $i ($(echo python repro.py $reuse)): exit $rc after $((SECONDS - t)) s, illegal memory access: $ima"
      echo "run $i of ${ALONE_RUNS:-3} ($(echo python repro.py $reuse)): exit $rc, classified $kind; illegal memory access: $ima" >> $w/alone.result
      [ $ima = yes ] && break
    done
  else
    stamp "alone: no minify/repro.py"
    echo "not run: no minify/repro.py (minify exit $(cat $w/minify.rc 2>/dev/null))" > $w/alone.result
  fi
  summary

  wait  # the twin
  summary
  stamp "driver done"
  touch $w/done
}

main() {
  case "${1:-wait}" in
  _drive) drive; return ;;
  start)
    rm -rf $w; mkdir -p $w
    # The device tool copies the working tree afresh at every call: the driver runs from a copy, or a later call
    # deletes the folder it works in (a process without its working folder dies at `import torch`).
    rm -rf $w-src; cp -r "$PWD" $w-src
    (cd $w-src && PYTHONPATH=$w-src setsid nohup bash bench/gpu/minify_on_gpu.sh _drive > $w/drive.log 2>&1 \
       < /dev/null &) ;;
  esac
  local end=$((SECONDS + ${WAIT:-560}))
  while [ ! -f $w/done ] && [ $SECONDS -lt $end ]; do sleep 5; done
  collect
}
# One line: bash has read all of it before it runs, so a checkout changed under a running driver cannot reach it.
main "$@"; exit $?

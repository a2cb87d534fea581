"""How many runs go at once with --jobs unset (aoti_bisect/run/slots.py): the pure admission rule, the room's
measures, the scheduler held to them (fake runs), and a real run's sampled peak."""
import dataclasses
import sys
import threading
import time

import pytest

from aoti_bisect.run import process, slots
from aoti_bisect.run.harness import Harness
from aoti_bisect.run.layout import Layout
from aoti_bisect.run.scheduler import Scheduler
from aoti_bisect.run.slots import CUDA_CONTEXT, MARGIN, PRIOR_PER_GPU, Room, admit
from aoti_bisect.failure import FailureKind, Phase
from aoti_bisect.run.types import Outcome, ProcessExit, RunResult, RunSpec, Signature

GiB = 1 << 30
PLENTY = (64 * GiB, 64 * GiB)


def test_a_run_with_nothing_beside_it_always_starts():
    assert admit(0, 1, (0, 0), 100 * GiB, True, 0, 100 * GiB)


def test_no_more_runs_than_slots():
    assert admit(3, 4, PLENTY, None, False, None, None)
    assert not admit(4, 4, PLENTY, None, False, None, None)


@pytest.mark.parametrize("busy, at_start, now, peak, ok", [
    (1, 64 * GiB, 64 * GiB, None, True),
    (1, 3 * GiB, 64 * GiB, None, False),  # two runs of the prior's size do not fit what was free at the start
    (1, 64 * GiB, 2 * GiB, None, False),  # other work took the memory since
    (3, 40 * GiB, 40 * GiB, 8 * GiB, True),  # 4 x 8 x 1.25 = 40
    (4, 40 * GiB, 40 * GiB, 8 * GiB, False),
    (3, None, None, 8 * GiB, True),  # no /proc/meminfo: slots alone
])
def test_host_memory_holds_one_more_run_of_the_largest_size_seen(busy, at_start, now, peak, ok):
    assert admit(busy, 16, (at_start, now), peak, False, None, None) is ok


def test_on_a_gpu_runs_of_unknown_size_are_held_to_the_prior_and_then_to_its_free_memory():
    assert admit(PRIOR_PER_GPU - 1, 16, PLENTY, None, True, None, None)
    assert not admit(PRIOR_PER_GPU, 16, PLENTY, None, True, 80 * GiB, None)
    assert admit(PRIOR_PER_GPU, 16, PLENTY, None, True, 80 * GiB, 0)  # the runs told they used no GPU
    per_run = MARGIN * (4 * GiB + CUDA_CONTEXT)
    fits = int(80 * GiB / per_run)
    assert admit(fits - 1, 16, PLENTY, None, True, 80 * GiB, 4 * GiB)
    assert not admit(fits, 16, PLENTY, None, True, 80 * GiB, 4 * GiB)
    assert admit(1, 16, PLENTY, None, True, 80 * GiB, 100 * GiB) is False  # too big for two: one at a time


def test_once_a_run_ran_out_of_memory_runs_of_unknown_size_take_the_gpu_one_at_a_time():
    assert not admit(1, 16, PLENTY, None, True, 80 * GiB, None, oom=True)
    assert admit(2, 16, PLENTY, None, True, 80 * GiB, 20 * GiB, oom=True)  # a measured size still rules
    room = Room(8, gpu=True)
    assert room.admit(1)
    room.note(dataclasses.replace(_result(0), outcome=Outcome.FAILED,
                                  signature=Signature(FailureKind.OUT_OF_MEMORY, Phase.RUN, "CUDA out of memory")))
    assert room.admit(0) and not room.admit(1)


def _result(index: int, rss=None, gpu=None) -> RunResult:
    return RunResult(RunSpec(("python", "r.py"), "baseline", index, ()), Outcome.PASSED,
                     ProcessExit(0, None, False, 1.0, 0, peak_rss=rss), "/r", "/r/log", gpu_peak=gpu)


def test_the_room_keeps_the_largest_peaks_and_says_them():
    room = Room(8, gpu=True)
    room.note(_result(0, rss=3 * GiB, gpu=None))
    room.note(_result(1, rss=GiB, gpu=2 * GiB))
    room.note(_result(2, rss=None, gpu=GiB))
    assert room.describe() == {"slots": 8, "host_peak_bytes": 3 * GiB, "gpu": True, "gpu_peak_bytes": 2 * GiB,
                               "gpu_free_bytes": None}


class CountingRoom(Room):
    """Admits up to `limit` at once; records how many ran together."""

    def __init__(self, limit: int) -> None:
        super().__init__(8, gpu=False)
        self.limit, self.noted = limit, []

    def admit(self, busy: int) -> bool:
        return busy < self.limit

    def note(self, result: RunResult) -> None:
        self.noted.append(result.spec.index)


def test_the_scheduler_starts_no_run_the_room_refuses_and_tells_it_every_result(tmp_path):
    lock, now, most = threading.Lock(), [0], [0]

    def run(spec, cancel):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
        return _result(spec.index)

    room = CountingRoom(3)
    layout = Layout(str(tmp_path / "run"))
    scheduler = Scheduler(run, layout, 8, process.Cancel(), lambda spec: None, room)
    specs = [RunSpec(("python", "r.py"), "baseline", i, ()) for i in range(12)]
    for s in specs:
        layout.mark_warm(s)  # a warm key: no first run alone
    results = scheduler.run_many(specs)
    assert len(results) == 12 and most[0] == 3 and sorted(room.noted) == list(range(12))


def test_jobs_unset_sizes_the_harness_by_the_machine_and_jobs_given_fixes_it(tmp_path):
    auto = Harness(str(tmp_path / "a"), jobs=None)
    assert auto.room is not None and auto.scheduler.jobs == slots.cores()
    fixed = Harness(str(tmp_path / "f"), jobs=3)
    assert fixed.room is None and fixed.scheduler.jobs == 3


def test_a_runs_peak_is_its_processes_resident_memory(tmp_path):
    # 300 MiB touched and held for a second: sampled twice a second, the peak is at least that.
    code = "import time; b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.2)"
    exit = process.execute([sys.executable, "-c", code], {}, str(tmp_path), str(tmp_path / "log"), 60)
    assert exit.returncode == 0 and exit.peak_rss is not None and 300 << 20 <= exit.peak_rss < 2 * GiB


def test_the_report_says_how_many_runs_went_at_once_and_by_what():
    from aoti_bisect.report.markdown import _slots
    assert _slots({"jobs": 3}) == "3 (--jobs)"
    cpu = _slots({"slots": 2, "host_peak_bytes": GiB, "gpu": False, "gpu_peak_bytes": 0})
    assert cpu == "up to 2, one per core, each start beside others admitted by memory (the largest run: host 1.0 GiB)"
    gpu = _slots({"slots": 16, "host_peak_bytes": 2 * GiB, "gpu": True, "gpu_peak_bytes": GiB // 2})
    assert gpu is not None and gpu.endswith("(the largest run: host 2.0 GiB, GPU 0.5 GiB)")


def test_a_compile_ahead_run_that_could_not_run_drops_the_rest_of_the_queue(tmp_path):
    # With no torch every run fails at once: each queued compile would start only to fail the same way.
    def run(spec, cancel):
        if spec.compile_only:
            return dataclasses.replace(_result(spec.index), spec=spec, outcome=Outcome.INFRA_ERROR)
        time.sleep(2)  # the cold first run, beside which the compiles ahead go (the batch looks every 0.5 s)
        return _result(spec.index)

    scheduler = Scheduler(run, Layout(str(tmp_path / "run")), 2, process.Cancel(),
                          lambda spec: "/pkg" if spec.stage.startswith("ahead") else None)
    scheduler.ahead([RunSpec(("python", "r.py"), f"ahead-{name}", 0, (("FLAG", name),), hook=True)
                     for name in ("sanity", "trace", "inspect")])
    scheduler.run_many([RunSpec(("python", "r.py"), "baseline", 0, ())])
    scheduler.finish_ahead()
    assert [r.spec.stage for r in scheduler.ahead_results] == ["ahead-sanity"]

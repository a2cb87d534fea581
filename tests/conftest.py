"""Helpers shared by the test files: the captured logs under tests/logs, small Python children that stand in for a
repro, and the end-to-end lanes (tests/test_e2e.py), started when the session begins."""
import functools
import os
import subprocess
import sys
import textwrap

import pytest

from aoti_bisect.run.types import RunSpec

sys.path.insert(0, os.path.dirname(__file__))

LOGS = os.path.join(os.path.dirname(__file__), "logs")


def log(name):
    """A real captured log (torch 2.13 CPU captured here, torch 2.11 CUDA on the lent GPU) as text."""
    with open(os.path.join(LOGS, name), errors="replace") as f:
        return f.read()


def spec(path, index=0, timeout=60.0, env=()):
    """A baseline RunSpec that runs the Python script at `path`."""
    return RunSpec((sys.executable, path), "baseline", index, tuple(env), timeout)


@pytest.fixture
def write_script(tmp_path):
    """write_script(name, body) -> path of a dedented Python script in tmp_path."""
    def write(name, body):
        path = tmp_path / name
        path.write_text(textwrap.dedent(body))
        return str(path)
    return write


@functools.lru_cache(maxsize=None)
def torch_sees_a_gpu() -> bool:
    """What a repro's `torch.cuda.is_available()` says here, asked in a child so that collecting the tests
    never imports torch."""
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                         capture_output=True, text=True)
    return out.stdout.strip() == "True"


def _reads_the_lanes(item) -> bool:
    return "check_run" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: it must see the slow marker added here
def pytest_collection_modifyitems(config, items):
    """A heavy test is slow too: `-m "not slow"` on the command line replaces setup.cfg's `-m "not heavy"`, and the
    fast loop must not run them.

    The tests that read the end-to-end lanes' results run last, so that the lanes (started with the session,
    e2e_lanes below) run while every other test does; before them the slow tests (real compiles, many processes),
    so that the lanes' cold first compiles, the hang scenario's among them (its timeout must outlast its cold run),
    start beside the light tests.

    Among the slow tests, those marked `waits` (most of their time a timeout or a scheduler, not CPU) go first:
    the lanes end minutes before this process does, and the slow tests after them run on one core with the other
    idle, so a wait there is lost outright, while beside the lanes it leaves the lanes both cores
    (docs/benchmarks.md#the-test-suite)."""
    for item in items:
        if item.get_closest_marker("heavy") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    # Stable: within each group the tests keep pytest's order.
    items.sort(key=lambda item: (_reads_the_lanes(item), item.get_closest_marker("slow") is not None,
                                 item.get_closest_marker("waits") is None))


@pytest.fixture(scope="session", autouse=True)
def shared_headers(tmp_path_factory):
    """One folder of Inductor's precompiled headers for the whole session (AOTI_BISECT_HEADERS, run/layout.py):
    every bisection, lane, harness and minify of the suite links it instead of building the same headers (a pair,
    10-20 s) once per cache root. Their names hash the preprocessed header, the compiler and its flags, and Inductor
    builds each under a lock, so no answer can change. A test of the per-root default clears the variable."""
    from aoti_bisect.run.layout import HEADERS_ENV

    before = os.environ.get(HEADERS_ENV)
    os.environ[HEADERS_ENV] = str(tmp_path_factory.mktemp("precompiled-headers"))
    yield os.environ[HEADERS_ENV]
    if before is None:
        os.environ.pop(HEADERS_ENV, None)
    else:
        os.environ[HEADERS_ENV] = before


@pytest.fixture(scope="session", autouse=True)
def started_early(request, tmp_path_factory, shared_headers):
    """The work of the tests marked `early(job=...)`: each job, `job(folder, environ) -> value`, is all child processes
    (a bisection, an experiment), and one background thread runs the jobs one after another from the session's
    start, beside the lanes. The test reads the value when it runs (the `early` fixture), so that its minutes of
    processes, waits among them, leave the pytest process's own chain of tests, the suite's longest
    (docs/benchmarks.md#the-test-suite). A job's exception is raised in its test. A job takes the environment as
    the session began and gives its children absolute paths and their own cwd: the tests that run meanwhile
    change os.environ and the working directory."""
    jobs = []
    for item in request.session.items:
        marker = item.get_closest_marker("early")
        if marker is not None and marker.kwargs["job"] not in jobs:
            jobs.append(marker.kwargs["job"])
    if not jobs:
        yield {}
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="early")
    environ = dict(os.environ)
    yield {job: pool.submit(job, tmp_path_factory.mktemp(job.__name__.strip("_")), environ) for job in jobs}
    pool.shutdown(wait=True, cancel_futures=True)  # a session stopped early waits for the job under way


@pytest.fixture
def early(started_early):
    """early(job) -> what the job returned (see started_early)."""
    return lambda job: started_early[job].result()


@pytest.fixture(scope="session", autouse=True)
def e2e_lanes(request, tmp_path_factory, shared_headers):
    """The scenario checks of tests/test_e2e.py, started as the session's first test starts when any selected test
    reads them. They are real AOTI bisections in child processes (about 12 minutes of two busy cores, one lane of
    them mostly waiting on a hang's timeouts); started first, they run beside the rest of the suite instead of after
    it. Measured: docs/benchmarks.md#the-test-suite."""
    if not any(_reads_the_lanes(item) for item in request.session.items):
        yield None
        return
    import test_e2e

    root = tmp_path_factory.mktemp("scenarios")
    checks = test_e2e.start_lanes(root)
    try:
        yield checks, root
    finally:
        checks.stop()  # a no-op once they ended; ends them where the session stopped early

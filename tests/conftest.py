"""Helpers shared by the test files: the captured logs under tests/logs, and small Python children that
stand in for a repro."""
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

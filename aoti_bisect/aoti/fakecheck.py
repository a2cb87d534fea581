"""What the hook's fake-function check (child/hook/fakecheck.py) and capture (capture.py) wrote into a run
folder, as frozen records.

`parse` and `capture_problem` are pure; `read_fakecheck` reads a run folder's fakecheck.json and
capture/capture.json. A missing or damaged file gives a record whose `problem` says why in one line, never an
exception.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Optional

from ..child import contract
from ..files.own import loads_child_json, read_run_file

CAPTURE = os.path.join(contract.CAPTURE_DIR, contract.CAPTURE_RECORD)
MAX_BYTES = 4 << 20
# What an op's status means, for the lines that explain why an op could not be checked.
_UNCHECKED = {"no_fake": "has no fake function", "fake_raised": "its fake function raised",
              "op_raised": "the op raised", "running": "the process died inside the op"}


@dataclass(frozen=True)
class OpCheck:
    op: str  # ns::op
    status: str  # match | mismatch | no_fake | fake_raised | op_raised | running
    inputs: tuple[str, ...] = ()  # each tensor argument as "[6, 12] float32"
    mismatches: tuple[str, ...] = ()
    error: Optional[str] = None

    def describe(self) -> str:
        """One line: the mismatch, or why the op could not be checked."""
        if self.mismatches:
            return f"the fake function of `{self.op}` disagrees with the op on inputs {', '.join(self.inputs)}: " \
                   + "; ".join(self.mismatches)
        why = _UNCHECKED.get(self.status, self.status)
        return f"`{self.op}` could not be checked: {why}" + (f" ({self.error})" if self.error else "")


@dataclass(frozen=True)
class FakeCheck:
    call: Optional[int] = None  # which call of the compiled model (from 0) was checked
    custom_ops: tuple[str, ...] = ()
    ops: tuple[OpCheck, ...] = ()
    problem: Optional[str] = None  # why nothing (or not everything) was checked
    capture: Optional[str] = None  # the folder holding the checked call's program and inputs
    capture_problem: Optional[str] = None  # why they were not captured
    differences: tuple[str, ...] = ()  # the package's outputs against eager's on the checked call, one line each

    @property
    def mismatch(self) -> Optional[OpCheck]:
        return next((o for o in self.ops if o.mismatches), None)

    @property
    def unchecked(self) -> list[OpCheck]:
        return [o for o in self.ops if o.status not in ("match", "mismatch")]

    def conviction(self, failing: bool) -> list[str]:
        """The evidence lines of a mismatch, the one that convicts first."""
        return [self.mismatch.describe() + ": the package was compiled for the fake's layout, so it allocates "
                "and reads the op's output by a layout the op does not produce",
                f"checked on call {self.call} of the compiled model in a {'failing' if failing else 'passing'} "
                "run; " + (f"its program and inputs are saved in {self.capture}" if self.capture else
                           f"its program and inputs were not captured: {self.capture_problem}"),
                *self.differences]


def no_mismatch(checks: list[FakeCheck]) -> str:
    """The finding of checks that convict nothing: which fakes agreed, what could not be checked and why, and
    how the package's outputs differ from eager's."""
    agreed = sorted({o.op for c in checks for o in c.ops if o.status == "match"})
    lines = [f"the fake functions of {', '.join(f'`{o}`' for o in agreed)} agree with the ops on the call's "
             "inputs"] if agreed else []
    lines += [c.problem for c in checks if c.problem] + [o.describe() for c in checks for o in c.unchecked]
    lines += [d for c in checks for d in c.differences]
    return "; ".join(dict.fromkeys(lines))


def _tensor(d: Optional[dict]) -> str:
    return f"{d['shape']} {d['dtype']}" if d else "-"


def parse(text: str, where: str = contract.FAKECHECK_RESULT) -> FakeCheck:
    try:
        data = loads_child_json(text)
        ops = tuple(OpCheck(str(o["op"]), str(o["status"]), tuple(_tensor(t) for t in o.get("inputs") or () if t),
                            tuple(str(m) for m in o.get("mismatches") or ()), o.get("error"))
                    for o in data["ops"])
        problem = data.get("problem")
        if data.get("status") == "running" and not problem:
            problem = "the process died while the program ran eagerly" + (
                f" (inside `{ops[-1].op}`)" if ops and ops[-1].status == "running" else "")
        return FakeCheck(data.get("call"), tuple(str(o) for o in data.get("custom_ops") or ()), ops, problem)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        return FakeCheck(problem=f"{where} is not a fake-function check: {type(exc).__name__}: {exc}"[:300])


def differences(text: str) -> tuple[str, ...]:
    """One line per output of the package that eager does not match within assert_close's tolerance."""
    try:
        return differing_outputs(loads_child_json(text))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return (f"{contract.DIFFERENTIAL_RESULT} is damaged: {type(exc).__name__}: {exc}"[:300],)


def differing_outputs(data: dict) -> tuple[str, ...]:
    """differences() over a parsed differential: its `problem` and `outputs` rows. Raises on a damaged one."""
    if data.get("problem"):
        return (f"the package's outputs against eager: {data['problem']}",)
    lines = []
    for o in data["outputs"]:
        if o.get("close"):
            continue
        if o.get("problem"):
            lines.append(f"output {o['index']}: {o['problem']}")
        else:
            lines.append(f"output {o['index']} ({o['shape']} {o['dtype']}) differs from eager on the same "
                         f"inputs by up to {_number(o['max_abs'])} (tolerance rtol {o['rtol']:g}, atol {o['atol']:g}, "
                         "as torch.testing.assert_close)")
    return tuple(lines)


def _number(x: Optional[float]) -> str:
    return "? (no element is finite in both)" if x is None else f"{x:.4g}"


def capture_problem(text: str) -> Optional[str]:
    """None when capture.json says the program and a call's inputs were saved; else why not, in one line."""
    try:
        data = loads_child_json(text)
        missing = [data.get(f"{k}_problem") or f"no {k} saved" for k in ("program", "inputs") if not data.get(k)]
    except (ValueError, AttributeError) as exc:
        return f"capture.json is damaged: {type(exc).__name__}: {exc}"[:300]
    return "; ".join(missing) or None


def _read(path: str) -> str:
    return read_run_file(path, MAX_BYTES)


def read_fakecheck(run_dir: str) -> FakeCheck:
    check = _read_check(run_dir)
    path = os.path.join(run_dir, CAPTURE)
    try:
        problem = capture_problem(_read(path))
    except FileNotFoundError:
        problem = "nothing was captured (capture.json is missing)"
    except OSError as exc:
        problem = f"cannot read {path}: {exc.strerror or exc}"
    try:
        diff = differences(_read(os.path.join(run_dir, contract.DIFFERENTIAL_RESULT)))
    except OSError:  # absent: the call raised or died, or nothing ran eagerly
        diff = ()
    return dataclasses.replace(check, capture=None if problem else os.path.dirname(path), capture_problem=problem,
                               differences=diff)


def _read_check(run_dir: str) -> FakeCheck:
    path = os.path.join(run_dir, contract.FAKECHECK_RESULT)
    try:
        return parse(_read(path), path)
    except FileNotFoundError:
        return FakeCheck(problem="no fake-function check was written: the process never called a compiled "
                                 "model (it failed before, or ran without the hook)")
    except OSError as exc:
        return FakeCheck(problem=f"cannot read {path}: {exc.strerror or exc}")

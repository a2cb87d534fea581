"""`aoti-bisect nightly` on a real GPU host: every run pinned to one GPU, the slots spread over the GPUs.

Runs tests/repros/cuda_set.toml (an eager CUDA script, no compile) 8 times as a real subprocess and checks
each run's log: exactly one visible device; with two or more GPUs, at least two distinct physical GPUs (by
uuid) were used; the failures are exactly the seeded ones and are classified as device-side asserts.
Skipped where nvidia-smi lists no GPU (CI). Nothing heavy is imported at collection time.
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "tests", "repros", "cuda_set.toml")
RUNS = 8


def _smi_gpus() -> list[tuple[str, str]]:
    """(uuid as nvidia-smi prints it, uuid without the GPU- prefix) for every GPU it lists; [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [(m[1], _norm(m[1])) for m in re.finditer(r"^GPU \d+:.*\(UUID: (\S+?)\)", out, re.M)]


def _norm(uuid: str) -> str:
    return uuid.strip().lower().removeprefix("gpu-")


def _visible(smi: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(CUDA_VISIBLE_DEVICES entry, uuid) for the GPUs nightly will slot: the entries of CUDA_VISIBLE_DEVICES
    as given (indices or GPU-uuids), else every GPU nvidia-smi lists, by uuid."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return smi
    by_index = {str(i): u for i, (_, u) in enumerate(smi)}
    uuids = {u for _, u in smi}
    out = []
    for d in (d.strip() for d in cvd.split(",")):
        if d in by_index:
            out.append((d, by_index[d]))
        elif _norm(d) in uuids:
            out.append((d, _norm(d)))
    return out


SMI = _smi_gpus()

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not SMI, reason="no CUDA GPU (nvidia-smi missing or lists none)")]


def _expected_failures() -> tuple[list[int], str]:
    import tomllib  # Python 3.11+; imported here so collection never fails on it

    with open(MANIFEST, "rb") as f:
        entry = tomllib.load(f)["repro"][0]
    p, seed = float(entry["args"][0]), int(entry["args"][1])
    return [i for i in range(RUNS) if random.Random(seed * 1_000_003 + i).random() < p], entry["name"]


def _field(log: str, pattern: str) -> str:
    m = re.search(pattern, log, re.M)
    assert m, f"{pattern!r} not in the run's log:\n{log[-3000:]}"
    return m[1]


def test_nightly_pins_each_run_to_one_gpu(tmp_path):
    out = tmp_path / "night"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "aoti_bisect", "nightly", MANIFEST, "--runs", str(RUNS), "--out", str(out),
           "--db", str(tmp_path / "h.sqlite3"), "-v"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    print(proc.stdout)
    print(proc.stderr)
    # 1 is right on a first night: the failure signature is new to the history.
    assert proc.returncode in (0, 1), f"nightly exited {proc.returncode}"

    records = [json.loads(line) for line in (out / "records" / "shard-0-of-1.jsonl").read_text().splitlines()]
    header = records[0]
    runs = sorted((r for r in records if r["type"] == "run"), key=lambda r: r["index"])
    assert [r["index"] for r in runs] == list(range(RUNS))
    visible = _visible(SMI)
    smi_uuid = dict(visible)
    print(f"nvidia-smi GPUs: {SMI}; gpu_slots in the header: {header.get('gpu_slots')}")

    seen = {}  # CUDA_VISIBLE_DEVICES value -> uuids the runs given it reported
    for r in runs:
        log = open(r["log"], errors="replace").read()
        cvd = _field(log, r"^CUDA_VISIBLE_DEVICES=(.*)$")
        count = int(_field(log, r"^device_count=(\d+)$"))
        uuid = _norm(_field(log, r"^gpu uuid=(\S+)"))
        print(f"run {r['index']}: CUDA_VISIBLE_DEVICES={cvd} uuid={uuid} outcome={r['outcome']} kind={r['kind']}")
        assert count == 1, f"run {r['index']} saw {count} devices"
        assert "," not in cvd and cvd != "<unset>", f"run {r['index']}: CUDA_VISIBLE_DEVICES={cvd!r}"
        assert cvd in smi_uuid, f"run {r['index']} pinned to {cvd}, not one of the visible GPUs {list(smi_uuid)}"
        seen.setdefault(cvd, set()).add(uuid)

    for cvd, uuids in seen.items():
        assert len(uuids) == 1, f"runs given CUDA_VISIBLE_DEVICES={cvd} saw different GPUs: {uuids}"
    used = set().union(*seen.values())
    assert used <= {u for _, u in SMI}, f"uuids {used} not among nvidia-smi's {SMI}"
    if len(visible) >= 2:
        assert len(used) >= 2, f"{len(visible)} GPUs visible but every run landed on {used}"
    mismatched = {cvd: u for cvd, u in seen.items() if smi_uuid.get(cvd) not in u}
    print(f"CUDA index -> nvidia-smi index order mismatches (CUDA_DEVICE_ORDER): {mismatched or 'none'}")

    expected, name = _expected_failures()
    failed = [r["index"] for r in runs if r["outcome"] in ("failed", "crashed", "timeout")]
    assert failed == expected, f"failed runs {failed}, seeded expectation {expected}"
    for r in runs:
        if r["index"] in expected:
            assert r["kind"] == "device_assert", f"run {r['index']}: kind {r['kind']}: {r['message']}"
            assert r["phase"] == "run"
        else:
            assert r["outcome"] == "passed", f"run {r['index']}: {r['outcome']} {r['kind']}: {r['message']}"

    summary = json.loads((out / "summary.json").read_text())
    (repro,) = [x for x in summary["repros"] if x["name"] == name]
    assert (repro["rate"]["failures"], repro["rate"]["runs"]) == (len(expected), RUNS)
    assert [s["kind"] for s in repro["signatures"]] == (["device_assert"] if expected else [])

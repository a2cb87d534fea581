#!/usr/bin/env python3
"""Where the runs of finished bisections spent their time: every runs/*/result.json under the folders given (a
`bench/verdict.py --keep` folder, or the results.tar.gz of bench/gpu/verdict_on_gpu.sh unpacked), grouped by
scenario (the folder above runs/) and by how the run started: forked warm, cold taking the stored package, or cold
compiling (or without the hook). Each row: runs, median seconds, median phases (run/phases.py), failures with their
Wilson 95% interval and signatures (bench/repeated.py's row), and the largest resident memory of a run.

Usage: python bench/phases.py FOLDER...
"""
from __future__ import annotations

import glob
import json
import os
import sys
from collections import defaultdict

from _common import REPO, table
from repeated import row

sys.path.insert(0, REPO)
from aoti_bisect.run.phases import PHASES  # noqa: E402


def start(r: dict) -> str:
    if r.get("warm"):
        return "warm"
    return "cold, took the stored package" if "reuse" in (r.get("phases") or {}) else "cold, compiled or unhooked"


def main() -> None:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for folder in sys.argv[1:]:
        for path in sorted(glob.glob(os.path.join(folder, "**", "runs", "*", "result.json"), recursive=True)):
            with open(path) as f:
                r = json.load(f)
            r["phases"] = r.get("phases") or {}
            scenario = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(path))))
            groups[(scenario, start(r))].append(r)
    rows = []
    for (scenario, how), rs in sorted(groups.items()):
        peak = max((r.get("peak_rss_bytes") or 0 for r in rs), default=0)
        rows.append([scenario, *row(how, rs), f"{peak / (1 << 30):.1f}"])
    print(table(["scenario", "start", "runs", "warm", "median s", *PHASES, "failed (95% CI)", "signatures",
                 "peak GiB"], rows))


if __name__ == "__main__":
    main()

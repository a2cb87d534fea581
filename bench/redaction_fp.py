"""False positives of the redactor on the real captured logs of the bundled scenarios (tests/logs/, docs/examples/).

These files hold no secret, so every mask is a false positive. Prints the machine, the date, each file's masks
and what was masked (the original text, which is not secret here), and the totals.

    python bench/redaction_fp.py [--env-free] > bench/results-redaction-<date>.txt
"""
from __future__ import annotations

import datetime as _dt
import glob
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from aoti_bisect.report.redact import MASK, Redactor  # noqa: E402


def masked_lines(before: str, after: str) -> list[tuple[str, str]]:
    """(original line, redacted line) of every line that gained a mask (line counts are kept by every rule but a
    private key block's, which these logs do not hold)."""
    return [(b, a) for b, a in zip(before.splitlines(), after.splitlines()) if a.count(MASK) > b.count(MASK)]


def main() -> int:
    files = sorted(f for pattern in ("tests/logs/**/*", "docs/examples/*")
                   for f in glob.glob(os.path.join(ROOT, pattern), recursive=True)
                   if os.path.isfile(f) and not f.endswith((".png", ".py")))
    redactor = Redactor()  # no environment values: only the rules, which is what a false positive is about
    total_bytes = total_masks = 0
    took = 0.0
    lines = []
    for path in files:
        with open(path, errors="replace") as f:
            text = f.read()
        start = time.perf_counter()
        out = redactor(text)
        took += time.perf_counter() - start
        n = out.count(MASK) - text.count(MASK)
        total_bytes += len(text)
        total_masks += n
        if n:
            lines.append(f"{os.path.relpath(path, ROOT)}: {n} mask(s)")
            for b, a in masked_lines(text, out)[:20]:
                lines.append(f"    was: {b.strip()[:160]!r}\n    now: {a.strip()[:160]!r}")
    print(f"redaction false positives: {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} "
          f"on {platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()})")
    print(f"files: {len(files)}, bytes: {total_bytes}, masks: {total_masks} (every one a false positive), "
          f"redactor time: {took:.2f} s")
    print("\n".join(lines) if lines else "no masks")
    return 0


if __name__ == "__main__":
    sys.exit(main())

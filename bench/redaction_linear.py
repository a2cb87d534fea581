"""The redactor's time on hostile text: 1 MB made of one rule's prefix (or a secret name, a flag, a key header)
repeated, the shape that made a quadratic rule take minutes (96 KB of `SECRET` took 42-65 s before every
quantifier that a match can start inside of was bounded). Linear time means each 1 MB takes about as long as a
1 MB log.

    python bench/redaction_linear.py [--mb N] > bench/results-redaction-linear-<date>.txt
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from _common import machine  # noqa: E402
from aoti_bisect.report import secret_rules  # noqa: E402
from aoti_bisect.report.redact import Redactor  # noqa: E402

# Seeds repeated to fill the text: names, flags, quotes that never close, key headers without an END, and every
# token rule's leading literal.
SEEDS = ("SECRET", "SECRET.", "TOKEN", "TOKEN =", "password=\"\\\"", "password='", "-a.", "--token.", "api_key = \"",
         "authorization: \"\\\"", "Bearer ", "cookie: ", "'cookie: x", "cookies={", "<Cookie a=", "--cookie '",
         "://", "://a:", "x=", "a: ", "machine x login y ", "-----BEGIN PRIVATE KEY-----\n", "---- BEGIN SSH2 ",
         "PuTTY-User-Key-File-2:", "eyJ", "eyJa.", "a:5432:d:u:", "sig=", "?sig=",
         *(needle for needles in secret_rules.NEEDLES for needle in needles))


def hostile(seed: str, size: int) -> list[str]:
    """The seed repeated, alone, between spaces and before a run of letters: each reaches a different rule's
    longest scan."""
    return [(piece * (size // len(piece) + 1))[:size] for piece in (seed, seed + " ", seed + "a" * 30)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=1.0)
    size = int(parser.parse_args().mb * (1 << 20))
    redactor = Redactor(("hunter22",))
    rows = []
    for seed in dict.fromkeys(SEEDS):
        for text in hostile(seed, size):
            start = time.perf_counter()
            redactor(text)
            rows.append((time.perf_counter() - start, seed))
    rows.sort(reverse=True)
    print(machine())
    print(f"redactor on {size >> 10} KB of hostile text, {len(rows)} texts: slowest {rows[0][0]:.2f} s "
          f"({rows[0][1]!r}), total {sum(t for t, _ in rows):.1f} s")
    for took, seed in rows[:10]:
        print(f"  {took:6.2f} s  {seed!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

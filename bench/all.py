#!/usr/bin/env python3
"""Every benchmark of issue #7, or those --only names, under one machine line: 1 overhead.py, 2 parallel.py,
3 and 4 floor.py, 5 parse.py (each docstring defines its figures; each also runs alone).

Usage: python bench/all.py [--only 1,2,3,4,5] [--repeats 3] [--scenarios a,b] [--runs 20] [--jobs 2]
"""
import sys

import floor
import overhead
import parallel
import parse
from _common import OPTIONS, main

ITEMS = {"1": overhead.run, "2": parallel.run, "3": floor.run, "4": floor.run, "5": parse.run}


def run(args) -> None:
    done = set()
    for item in sorted(args.only):
        bench = ITEMS.get(item)
        if bench and bench not in done:  # items 3 and 4 come from one pass over the scenarios
            done.add(bench)
            bench(args)
            sys.stdout.flush()


if __name__ == "__main__":
    main(__doc__, run, tuple(OPTIONS))

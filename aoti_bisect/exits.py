"""Exit codes (one table for every command) and the one-line usage failure.

`aoti-bisect run` is a `git bisect run` predicate: git reads 0 as good, 1-127 except 125 as bad, 125 as "skip
this commit", and anything above 127 as "stop bisecting". So only a decision about the repro may use 0 or 1;
a commit where the repro or its environment cannot run says 125 (a missing or broken --python, no torch, a
full or read-only disk, a repro that deleted its own run folder); a command line that is wrong at every
commit says 2; only a fault of aoti-bisect itself says 255, which stops the bisection.
"""
from __future__ import annotations

EXIT_NOT_REPRODUCED = 0
EXIT_REPRODUCED = 1
EXIT_USAGE = 2  # a bad command line: the same at every commit (click and argparse use 2 too)
EXIT_INFRA = 3  # the nightly's "only infrastructure errors"; `run` says 125 for those
EXIT_INCOMPLETE = 4  # the nightly's "a shard is missing or unfinished: not judged" (merge --allow-partial judges)
EXIT_INCONCLUSIVE = 125
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe
EXIT_INTERNAL = 255  # aoti-bisect's own bug, and nothing else (a full disk is 125: the machine's state)


class UsageFailure(Exception):
    """Bad input, said in one line; the CLI prints it and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code

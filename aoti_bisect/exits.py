"""Exit codes (one table for every command) and the one-line usage failure the CLI prints."""
# Exit codes double as a `git bisect run` predicate: 0 good, 1 bad, 125 skip.
EXIT_NOT_REPRODUCED = 0
EXIT_REPRODUCED = 1
EXIT_USAGE = 2
EXIT_INFRA = 3
EXIT_INCONCLUSIVE = 125
EXIT_INTERRUPTED = 130



class UsageFailure(Exception):
    """Bad input, said in one line; the CLI prints it and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code

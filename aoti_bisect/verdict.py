"""The four verdicts a bisection can reach; the report maps each to its exit code."""
from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not_reproduced"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"

"""What the ladder concludes."""
from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not_reproduced"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"


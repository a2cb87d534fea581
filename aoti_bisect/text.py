"""Text from a child (or a report.json someone edited), made safe to show on a terminal or in Markdown."""
from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, and C1 controls: on a terminal ESC and the C1 CSI rewrite the screen,
# the title or the clipboard; BEL rings; CR overwrites the line; NUL cuts strings short downstream.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with each control character shown as a visible escape (ESC becomes the four characters \\x1b)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)

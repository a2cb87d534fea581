"""Text from a child (or a report.json someone edited), made safe to show on a terminal or in Markdown."""
from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, and C1 controls: on a terminal ESC and the C1 CSI rewrite the screen,
# the title or the clipboard; BEL rings; CR overwrites the line; NUL cuts strings short downstream.
# Bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069) reorder what a reader sees ("Trojan
# Source"); zero-width characters (U+200B-200D, U+2060, U+FEFF) hide inside names and split words a filter looks
# for. None of them is ever what a log means to show.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200d\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def printable(text: str) -> str:
    """`text` with each control, bidi or zero-width character shown as a visible escape (ESC becomes the four
    characters \\x1b, U+202E the six characters \\u202e)."""
    return _CONTROLS.sub(_escape, text)


def _escape(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code <= 0xff else f"\\u{code:04x}"

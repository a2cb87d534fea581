"""Untrusted text (a child's output, a report.json someone edited) made inert: on a terminal (printable) and on
a Markdown page GitHub renders (md_cell, md_code). The one home of both policies; every renderer calls these.

Characters are judged by their Unicode properties, not by a list of known cases: a list misses the next case."""
from __future__ import annotations

import functools
import html
import re
import unicodedata

# Categories never shown as themselves: controls (Cc; on a terminal ESC and the C1 CSI rewrite the screen, the
# title or the clipboard, CR overwrites the line, NUL cuts strings short), every format character (Cf: bidi
# embeddings, overrides, isolates and marks reorder what a reader sees, "Trojan Source"; zero-width characters,
# the soft hyphen and the tag characters hide text inside names and split words a filter looks for), surrogates
# (Cs), unassigned code points (Cn: a later Unicode may make them any of these) and the line and paragraph
# separators (Zl, Zp: a line break to some readers, none to others).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"})
# Default-ignorable characters outside those categories (Unicode's Default_Ignorable_Code_Point: variation
# selectors, the Hangul fillers, the combining grapheme joiner, the Khmer inherent vowels) render as nothing.
_IGNORABLE_NAMES = ("VARIATION SELECTOR", "FILLER", "GRAPHEME JOINER", "KHMER VOWEL INHERENT")
# Only these can be hidden: printable ASCII, tab and newline never are, and skipping them keeps logs fast.
_CANDIDATE = re.compile(r"[^\t\n\x20-\x7e]")


@functools.lru_cache(maxsize=4096)
def hidden(char: str) -> bool:
    """Whether `char` renders as something other than itself: a control, a format character, or invisible."""
    if unicodedata.category(char) in _HIDDEN_CATEGORIES:
        return True
    name = unicodedata.name(char, "")
    return any(part in name for part in _IGNORABLE_NAMES)


def printable(text: str) -> str:
    """`text` with each hidden character (`hidden`) shown as a visible escape: ESC becomes the four characters
    \\x1b, U+202E the six characters \\u202e, a tag character \\U000e0041."""
    return _CANDIDATE.sub(_escape, text)


def _escape(m: re.Match) -> str:
    char = m.group()
    if not hidden(char):
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xff else f"\\u{code:04x}" if code <= 0xffff else f"\\U{code:08x}"


# Backslash-escaped wherever they stand: code spans, emphasis, strikethrough, table cells, math. `_` only where
# it could open or close emphasis: inside a word (cpp_fused_add_0) it never does. A link or image needs `](`:
# its `(` is escaped, so `size [4, 16]` stays readable. (`[x]` alone links only to a reference definition, which
# must start a line, and md_cell's text never does: it follows a bullet, a label or a table's `|`.)
_MD_PUNCT = re.compile(r"[\\`*~|$]|(?<=\])\(|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# What GitHub turns into a notification, a cross-link or a link: a mention (@user, @org/team), an issue reference
# (#123, owner/repo#7, GH-5), and its autolinks (GFM's autolink extension): any `scheme://` (an issue URL of another
# repository posts a "mentioned" event there), a `www.` name, an e-mail address (also after mailto: or xmpp:). A
# zero-width space (written as an entity, never raw) after the `@`, `#`, `GH-`, `://` or `www` leaves the text as it
# reads and matches none of GitHub's filters (Renovate does the same for mentions). ASCII classes: GitHub's filters
# are Ruby regexes, whose \w is ASCII (`é@user` is a mention there).
_LIVE = re.compile(r"@|#(?=\d)|(?i:GH-)(?=\d)|://|(?i:www)(?=\.)")
# A word that opens a block where it starts a line: a heading, a list item, a quote. Layouts wrap md_cell's text at
# any space, so every such word is made safe at a line's start; a run of `-` or `=` only where it could stand alone
# on a line, as the last word (a thematic break or setext underline); `[` only as the first (a reference
# definition, `[x]: url`, cannot interrupt a paragraph).
_BLOCK_WORD = re.compile(r"#{1,6}|[-+]|\d{1,9}[.)]|>.*")
_LAST_WORD = re.compile(r"-+|=+")


def md_cell(text: object) -> str:
    """The one way untrusted text enters a Markdown page: one line that renders as exactly what it says.

    Whitespace becomes single spaces (nothing can end a table row, list item or paragraph), hidden characters are
    visible escapes (printable), entities and HTML are shown as typed, Markdown punctuation is escaped, no word can
    open a block wherever a layout wraps the line, and mentions, references and autolinks are not live. Callers
    pass redacted text: the report's data goes through the redactor before any renderer sees it (report/model.py,
    redact_data)."""
    words = printable(" ".join(str(text if text is not None else "").split())).split(" ")
    return " ".join(_md_word(w, first=i == 0, last=i == len(words) - 1) for i, w in enumerate(words))


def _md_word(word: str, first: bool, last: bool) -> str:
    s = _MD_PUNCT.sub(lambda m: "\\" + m.group(), word.replace("&", "&amp;").replace("<", "&lt;"))
    if _BLOCK_WORD.fullmatch(s) or (first and s.startswith("[")) or (last and _LAST_WORD.fullmatch(s)):
        s = s[:-1] + "\\" + s[-1] if s[0].isdigit() else "\\" + s
    return _not_live(s)


def _not_live(s: str) -> str:
    return _LIVE.sub(lambda m: m.group() + "&#8203;", s)


def html_text(text: object) -> str:
    """md_cell for raw HTML (a <details> summary, where Markdown is not read but GitHub still finds mentions and
    references in the text): HTML-escaped, with the same mentions, references and autolinks not live."""
    return _not_live(html.escape(printable(" ".join(str(text if text is not None else "").split())), quote=False))


def md_code(text: object) -> str:
    """Untrusted text as inline code: GitHub links no URL, mention or reference and decodes no entity in code,
    so it is shown as typed; a `|` is still escaped (a table splits cells before it reads code spans)."""
    s = printable(" ".join(str(text if text is not None else "").split())).replace("|", "\\|")
    fence = "`" * (longest_backtick_run(s) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest

"""Nothing secret leaves the machine: pure functions that scrub text before it reaches a report or bundle."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..files import user_name

SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
MASK = "<redacted>"

_TOKEN_PATTERNS = [
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),             # GitHub
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"),               # GitLab
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),              # AWS access key id
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),          # Slack
    re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),                    # Hugging Face
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),                  # OpenAI-style
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),                  # Google API key
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"),  # JWT
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{16,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
]
_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:%s)[A-Za-z0-9_]*)(=|: |=')([^\s'\"\\]+)" % "|".join(SECRET_WORDS),
                         re.I)


def is_secret_name(name: str) -> bool:
    return any(word in name.upper() for word in SECRET_WORDS)


@dataclass(frozen=True)
class Redactor:
    """Masks known token formats, `SECRET_NAME=value` assignments, and the literal values of secret-named
    variables of the environment it was made from (a token in any format, printed by the child, is caught)."""

    secret_values: tuple[str, ...] = ()
    paths: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def from_env(cls, env: dict[str, str], redact_paths: bool = False) -> "Redactor":
        # Short values would mask ordinary words all over a log; real secrets are long.
        values = tuple(sorted({v for k, v in env.items() if is_secret_name(k) and len(v) >= 8}, key=len,
                              reverse=True))
        paths: list[tuple[str, str]] = []
        if redact_paths:
            home = os.path.expanduser("~")
            if home and home != "/":
                paths.append((home, "~"))
            user = user_name()
            if user:
                paths.append((f"/home/{user}", "/home/<user>"))
                paths.append((user, "<user>"))
        return cls(values, tuple(paths))

    def __call__(self, text: str) -> str:
        for value in self.secret_values:
            text = text.replace(value, MASK)
        for pattern in _TOKEN_PATTERNS:
            text = pattern.sub(MASK, text)
        text = _ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        for old, new in self.paths:
            text = re.sub(rf"(?<![\w.-]){re.escape(old)}(?![\w-])", new, text) if old.isidentifier() else \
                text.replace(old, new)
        return text

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return {k: MASK if is_secret_name(k) else self(v) for k, v in env.items()}

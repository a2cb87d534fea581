"""Nothing secret leaves the machine: pure functions that scrub text and report data before they reach a report,
a bundle or a nightly file. The token rules are detect-secrets' and gitleaks', kept as data (secret_rules.py)."""
from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import re
import shlex
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Optional, TypeVar, cast

from ..files.write import user_name
from ..text import printable
from . import secret_rules

MASK = "<redacted>"
T = TypeVar("T")

# A name is secret when it ends with one of these (MY_API_TOKEN, apiKey, PGPASSWORD, --api-key) or holds a
# strong word anywhere (secret_key_base). Ending, not containing: KeyError, TOKENIZERS_PARALLELISM, max_tokens
# and KEYTIMEOUT are everyday names whose values must stay readable.
# _PWD with its underscore (MYSQL_PWD, DB_PWD): a bare PWD (or OLDPWD) is the shell's working directory.
# _PAT and _OTP with theirs too (GITHUB_PAT, MFA_OTP): COMPAT and FOOTPRINT-like words end so without one.
SECRET_SUFFIXES = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS",
                   "CREDS", "AUTH", "_PWD", "_PAT", "_OTP", "KEY_ID", "COOKIE", "COOKIES", "SESSION", "SESSIONID",
                   "SESSION_ID")
STRONG_WORDS = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
# Switch values of secret-named variables (HF_HUB_DISABLE_IMPLICIT_TOKEN=1) hide nothing and would mask every
# "1" or "true" in a log.
_SWITCHES = {"0", "1", "true", "false", "yes", "no", "on", "off", "none", "null"}
_DEVICES = {"cpu", "cuda", "gpu", "xpu", "mps", "meta", "hip", "rocm", "auto"}
# A call in a traceback's source line (`session = requests.Session()`, `key = make_key(x)`): code, not a value.
_CALL = re.compile(r"[a-z_][\w.]{0,200}\([^()]{0,200}\)")
# Shorter values are masked only as whole tokens, so a password "pass" cannot mangle "passed".
ANYWHERE_LENGTH = 8

_WORD = r"[A-Za-z0-9_]"
_NAME_END = "|".join(SECRET_SUFFIXES)


def _any_case(words: tuple[str, ...]) -> str:
    """An alternation of the words in any case, led by a class of their first letters: re.I, or a bare
    alternation tried at every position of a 32 MiB log, is 3-5x slower."""
    firsts = "".join(sorted({c for w in words for c in w[0] + w[0].lower()}))
    return f"(?=[{firsts}])(?:" + "|".join("".join(f"[{c}{c.lower()}]" for c in w) for w in words) + ")"


# Every quantifier that a match can start inside of is bounded: a regex tried at each of n positions must not
# scan the rest of the text from each (quadratic; 96 KB of `SECRET` took a minute). A quoted value is at most
# MAX_QUOTED characters (a longer one is left to the other rules); an unquoted one is consumed whole once matched.
MAX_QUOTED = 512
MAX_NAME = 64
_VALUE = rf"\"(?:[^\"\\\n]|\\.){{0,{MAX_QUOTED}}}\"|'[^'\n]{{0,{MAX_QUOTED}}}'|[^\s'\"]+"

# The token rules (detect-secrets' and gitleaks'), as data with their sources: secret_rules.py.
_TOKEN_PATTERNS = list(zip(secret_rules.COMPILED, secret_rules.NEEDLES))
_PEM_BEGIN = re.compile(secret_rules.PEM_BEGIN)
_PEM_END = re.compile(secret_rules.PEM_END)
# A key's body line (base64, or an RFC 1421 header such as `Proc-Type: 4,ENCRYPTED`).
_PEM_BODY = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]{1,100}|[A-Za-z-]+: [^\n]*)[ \t]*\r?$")
# The value of an assignment (`x = "v"`, `x: v`, `--x=v`), whatever its name: masked when its entropy is
# detect-secrets' high-entropy limit or more. Led by the separator, which the regex engine can skip to.
_ANY_ASSIGNMENT = re.compile(r"(?:(?<=[\w\"'\]])|(?<=[\w\"'\]] ))(?:=|:(?!:))[ \t]*([\"']?)"
                             rf"([A-Za-z0-9+/_-]{{{secret_rules.ENTROPY_MIN_LENGTH},}}={{0,2}})(?![\w+/=-])")
# scheme://user:password@host keeps the user; scheme://token@host (no colon) loses it, as pip's redact_auth_from_url
# (An empty user with a password, `redis://:password@host`, is Redis's own form.)
_URL_USERINFO = re.compile(r"(://)([^\s/?#@:'\"<>]*)(?::([^\s/?#@'\"<>]*))?@")
_AUTH_HEADER = re.compile(rf"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                          rf"(?:(bearer|basic|token|digest|negotiate)\s+)?({_VALUE})")
# Cookies carry sessions: the whole header value goes, as a browser's devtools export with "sanitize" does.
# A header, not a word of prose: at a line's start (curl -v's `> `/`< ` too) or opening a quoted string
# (ASan's legend line "Array cookie:" is neither).
_COOKIE_HEADER = re.compile(r"(?im)(?:^[ \t]*(?:[<>][ \t]*)?|(?<=[\"']))((?:set-)?cookie:\s*)([^\r\n\"']+)")
# A .netrc entry (curl, git, pip and ftp read it): `machine HOST [login U] [account A] password P`, on one line
# or several; `password` alone before a word is everyday prose ("password reset failed").
# Cookies printed as a Python dict (`cookies={'sessionid': 'v'}`, requests' `dict(r.cookies)`) or by a cookie jar's
# repr (`<Cookie sessionid=v for example.com/>`): every cookie's value goes, whatever its name. (curl's
# `--cookie v` is a secret-named flag.)
_COOKIE_DICT = re.compile(r"(?i)(\bcookies?[\"']?\s{0,16}[=:]\s{0,16})\{[^{}\n]{0,4096}\}")
_COOKIE_REPR = re.compile(r"(<Cookie [^=\s>]{1,256}=)([^\s>]{0,4096})( for )")
# A .pgpass line (libpq's password file): host:port:database:user:password, the password last.
_PGPASS = re.compile(r"(?m)^((?:\*|[A-Za-z0-9][A-Za-z0-9.-]{0,252}):(?:\d{1,5}|\*):[^:\s]{1,256}:[^:\s]{1,256}:)(\S+)$")
_NETRC = re.compile(r"(?i)\b((?:machine\s+\S+|default)(?:\s+(?:login|account)\s+\S+)*\s+password\s+)(\S+)")
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{16,}")
# A secret-named assignment, matched from the end of its name (the name's start changes nothing).
_ASSIGNMENT = re.compile(rf"({_any_case(SECRET_SUFFIXES)}|{_any_case(STRONG_WORDS)}[\w.-]{{0,{MAX_NAME}}}+)([\"']?)"
                         rf"(\s{{0,16}}(?:=>|:=|=|:(?!:))\s{{0,16}})({_VALUE})")
# The flag and its value as separate words: `--password v`, or an argv list printed as Python or JSON.
_FLAG_THEN_VALUE = re.compile(rf"(?i)(?<![\w.-])(--?[\w.-]{{0,{MAX_NAME}}}?(?:{_NAME_END}))"
                              rf"([\"']\s{{0,16}},\s{{0,16}}|\s{{1,16}})(?!-|['\"]-)({_VALUE})")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return upper.endswith(SECRET_SUFFIXES) or any(word in upper for word in STRONG_WORDS)


def _is_secret_flag(arg: str) -> bool:
    return arg.startswith("-") and "=" not in arg and is_secret_name(arg.lstrip("-"))


def _not_a_secret(value: str) -> bool:
    """A secret-named assignment's value that hides nothing: a switch, a small count, a device name
    (`"no cached package for this key": 1`, `"AOTI_DEVICE_KEY": "cpu"`), one or two characters (ASan's legend,
    `Array cookie: ac`), a call in a traceback's source line."""
    bare = value.strip("\"'").lower()
    return (bare in _SWITCHES or bare in _DEVICES or (bare.isdigit() and len(bare) <= 4) or len(bare) <= 2
            or _CALL.fullmatch(bare) is not None)


def _masked(value: str) -> str:
    """A matched value, masked inside its quotes (a quoted JSON or shell value stays well-formed)."""
    if value == MASK:
        return value
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + MASK + value[0]
    return MASK


def _forms(value: str) -> set[str]:
    """How a value can appear in our files: as printed, JSON-escaped (spec.json, result.json), shell-quoted
    (rerun.sh)."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], shlex.quote(value)}


def _value_pattern(values: tuple[str, ...]) -> Optional[re.Pattern]:
    forms = sorted({f for v in values for f in _forms(v)}, key=len, reverse=True)
    if not forms:
        return None
    return re.compile("|".join(re.escape(f) if len(f) >= ANYWHERE_LENGTH
                               else rf"(?<!{_WORD}){re.escape(f)}(?!{_WORD})" for f in forms))


@dataclass(frozen=True)
class Redactor:
    """Masks the values of the secret-named variables of the environment it was made from (a token in any
    format, printed by the child, is caught), known token formats, credentials in URLs and headers, and
    secret-named assignments and flags (`password=v`, `"api_key": "v"`, `--token v`)."""

    secret_values: tuple[str, ...] = ()
    paths: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    _values: Optional[re.Pattern] = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_values", _value_pattern(self.secret_values))

    @classmethod
    def from_env(cls, env: dict[str, str], redact_paths: bool = False) -> Redactor:
        values = tuple(sorted({v for k, v in env.items()
                               if is_secret_name(k) and len(v) > 1 and v.lower() not in _SWITCHES}))
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

    def value_spans(self, text: str) -> list[tuple[int, int]]:
        """Where this environment's secret values occur in text (recorded at run end: see bundle.py)."""
        return [m.span() for m in self._values.finditer(text)] if self._values else []

    def __call__(self, text: str) -> str:
        text = mask_spans(text, self.value_spans(text))
        for pattern, needles in _TOKEN_PATTERNS:
            if not needles or any(n in text for n in needles):
                text = pattern.sub(MASK, text)
        text = _pem_fragments(text)
        text = _ANY_ASSIGNMENT.sub(_high_entropy_assignment, text)
        text = _URL_USERINFO.sub(_url_userinfo, text)
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + (m.group(2) + " " if m.group(2) else "")
                                + _masked(m.group(3)), text)
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {MASK}", text)
        text = _COOKIE_HEADER.sub(lambda m: m.group(1) + MASK, text)
        text = _COOKIE_DICT.sub(lambda m: m.group(1) + MASK, text)
        text = _COOKIE_REPR.sub(lambda m: m.group(1) + MASK + m.group(3), text)
        text = _PGPASS.sub(lambda m: m.group(1) + MASK, text)
        text = _NETRC.sub(lambda m: m.group(1) + MASK, text)
        text = _ASSIGNMENT.sub(lambda m: m.group(0) if _not_a_secret(m.group(4))
                               else "".join(m.group(1, 2, 3)) + _masked(m.group(4)), text)
        text = _FLAG_THEN_VALUE.sub(lambda m: m.group(1) + m.group(2) + _masked(m.group(3)), text)
        for old, new in self.paths:
            text = re.sub(rf"(?<![\w.-]){re.escape(old)}(?![\w-])", new, text) if old.isidentifier() else \
                text.replace(old, new)
        return text

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return {k: MASK if is_secret_name(k) else self(v) for k, v in env.items()}

    def data(self, value: T) -> T:
        """Report data (JSON, or a frozen record of it) with every string value redacted, keys and enums (our own
        words: a verdict, a kind) untouched: redacting serialized JSON instead would let a `"` or `\\` in a secret
        escape the mask, and a secret equal to a key rename it."""
        return cast(T, self._data(value))

    def _data(self, value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.replace(value, **{f.name: self._data(getattr(value, f.name))
                                                 for f in dataclasses.fields(value) if f.init})
        if isinstance(value, Mapping):
            redacted = {k: self._data(v) for k, v in value.items()}
            return redacted if isinstance(value, dict) else MappingProxyType(redacted)
        if isinstance(value, (list, tuple)):
            # An argv: `--password v` puts the secret in the element after the flag.
            items = [MASK if i and isinstance(v, str) and isinstance(value[i - 1], str)
                     and _is_secret_flag(value[i - 1]) else self._data(v) for i, v in enumerate(value)]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, str):
            return self(value)
        return value


def _url_userinfo(m: re.Match) -> str:
    user, password = m.group(2), m.group(3)
    if password is not None:
        return f"{m.group(1)}{user}:{MASK}@"
    return f"{m.group(1)}{MASK}@" if user else m.group(0)


def shannon_entropy(value: str) -> float:
    """Bits per character (detect-secrets' HighEntropyString.calculate_shannon_entropy)."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _high_entropy_assignment(m: re.Match) -> str:
    value = m.group(2).rstrip("=")
    # A generated secret of 24+ characters mixes cases and digits (odds of missing a digit: under 1%); a
    # function name (`cfunction_vectorcall_FASTCALL_KEYWORDS`) or a path does not.
    if (value.startswith("/") or not (re.search(r"\d", value) and re.search(r"[a-z]", value)
                                      and re.search(r"[A-Z]", value))
            or shannon_entropy(value) < secret_rules.ENTROPY_LIMIT):
        return m.group(0)
    return m.group(0)[: m.start(2) - m.start(0)] + MASK + m.group(0)[m.end(2) - m.start(0):]


def _pem_fragments(text: str) -> str:
    """A private key block that an excerpt, a line cut or a log's splice cut in two: its BEGIN line with the key
    lines after it, or the key lines before its END line. (Whole blocks are masked by the token rules first.)"""
    if "PRIVATE KEY" not in text:
        return text
    spans = []
    for m in _PEM_BEGIN.finditer(text):
        spans.append((m.start(), _body_end(text, m.end())))
    for m in _PEM_END.finditer(text):
        spans.append((_body_start(text, m.start()), m.end()))
    return mask_spans(text, spans)


def _body_end(text: str, pos: int) -> int:
    """The end of the key lines that follow pos (the end of a BEGIN line)."""
    end = text.find("\n", pos)
    while end != -1:
        nxt = text.find("\n", end + 1)
        line = text[end + 1: nxt if nxt != -1 else len(text)]
        if not _PEM_BODY.match(line) or not line.strip():
            return end
        if nxt == -1:
            return len(text)
        end = nxt
    return len(text)


def _body_start(text: str, pos: int) -> int:
    """The start of the key lines that come before pos (the start of an END line)."""
    start = text.rfind("\n", 0, pos) + 1 if pos else 0
    if text[start:pos].strip():  # END not at the start of its line: a cut line, mask from the line's start
        return start
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        line = text[prev:start - 1]
        if not _PEM_BODY.match(line) or not line.strip():
            return start
        start = prev
    return 0


def mask_spans(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(spans):
        if end <= last:
            continue
        out += [text[last:max(start, last)], MASK]
        last = end
    return "".join(out) + text[last:]


_SHARED: dict[tuple[bool, tuple], Redactor] = {}


def process_redactor(redact_paths: bool = False) -> Redactor:
    """The redactor of this process's environment: the one every writer of a published file uses (report,
    bundle, nightly records, summaries, junit.xml, --json, the history database). Rebuilt when the environment
    changed (tests set variables)."""
    key = (redact_paths, tuple(sorted(os.environ.items())))
    if key not in _SHARED:
        _SHARED.clear()
        _SHARED[key] = Redactor.from_env(dict(os.environ), redact_paths)
    return _SHARED[key]


def console(text: str) -> str:
    """A line for the terminal that may quote a child (a failure's message, a minify problem, a probe's error):
    redacted as the report is, with hidden characters shown as escapes. Every console sink calls it
    (progress.Progress, cli)."""
    return printable(process_redactor()(text))

"""The SET a night runs: its repros, from a manifest, a folder holding one, or a folder of *.py scripts."""
from __future__ import annotations

import glob
import os
import re
import sys
import tomllib
from dataclasses import dataclass

from ..exits import UsageFailure
from ..repro import validate_script
from ..validate import check_timeout


class SetError(UsageFailure):
    """A problem with the SET or the shard, said in one line."""


@dataclass(frozen=True)
class Repro:
    name: str
    argv: tuple[str, ...]
    device: str = "auto"
    timeout: float = 600.0

    @property
    def slug(self) -> str:
        """The repro's folder name (its runs, its bisection): a leading dot goes too, or `..` is the parent."""
        return re.sub(r"[^A-Za-z0-9_.-]+|^\.", "_", self.name)


def load_set(path: str, python: str, only: tuple[str, ...] = ()) -> list[Repro]:
    """A manifest (`scenarios/manifest.toml` format), a folder holding one, or a folder of *.py repros."""
    if os.path.isdir(path):
        manifest = os.path.join(path, "manifest.toml")
        if os.path.isfile(manifest):
            repros = _from_manifest(manifest, python, only)
        else:
            scripts = sorted(p for p in glob.glob(os.path.join(glob.escape(path), "**", "*.py"), recursive=True)
                             if not os.path.basename(p).startswith("_"))
            if not scripts:
                raise SetError(f"{path} holds no manifest.toml and no *.py repros")
            for p in scripts:
                _check_script(p)
            repros = [Repro(os.path.relpath(p, path)[:-3], (python, os.path.abspath(p))) for p in scripts]
    elif os.path.isfile(path):
        if not path.endswith(".toml"):
            raise SetError(f"{path} is neither a folder of repros nor a manifest (.toml)")
        repros = _from_manifest(path, python, only)
    else:
        raise SetError(f"no such file or folder: {path}")
    folders: dict[str, str] = {}
    for r in repros:
        # Two names for one folder (`a b`, `a_b`) would overwrite each other's logs and reports.
        if folders.setdefault(r.slug, r.name) != r.name:
            raise SetError(f"{path}: the names {folders[r.slug]!r} and {r.name!r} would share the folder {r.slug}; "
                           "rename one")
    if only:
        unknown = sorted(set(only) - {r.name for r in repros})
        if unknown:
            raise SetError(f"not in {path}: {', '.join(unknown)}")
        repros = [r for r in repros if r.name in only]
    return repros


def _from_manifest(path: str, python: str, only: tuple[str, ...] = ()) -> list[Repro]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise SetError(f"{path}: not valid TOML: {exc}")
    entries = data.get("scenario") or data.get("repro") or []
    if not entries:
        raise SetError(f"{path} lists no [[scenario]] or [[repro]] entries")
    if not (isinstance(entries, list) and all(isinstance(t, dict) for t in entries)):
        raise SetError(f"{path}: [[scenario]] and [[repro]] must be arrays of tables")
    base = os.path.dirname(os.path.abspath(path))
    repros, seen = [], set()
    for t in entries:
        name, script = t.get("name"), t.get("script")
        if not name or not script:
            raise SetError(f"{path}: every entry needs a name and a script")
        if not (isinstance(name, str) and isinstance(script, str)):
            raise SetError(f"{path}: an entry's name and script must be strings, not {name!r} and {script!r}"[:300])
        args = t.get("args", [])
        if not (isinstance(args, list) and all(isinstance(a, (str, int, float)) for a in args)):
            raise SetError(f"{path}: {name}: args must be a list of strings, not {args!r}"[:300])
        if name in seen:
            raise SetError(f"{path}: the name {name} is used twice")
        seen.add(name)
        if t.get("setup"):
            # A setup step (building the package a repro loads) is `scenarios check`'s; a night would run the
            # repro with `{setup}` unresolved and record a failure that is not the repro's. Said only of the
            # repros the night was asked for: `--only` names them.
            if name in only:
                raise SetError(f"{path}: {name} has a setup step, which runs only under `scenarios check`")
            if not only:
                print(f"aoti-bisect nightly: leaving out {name}: its setup step runs only under `scenarios check`",
                      file=sys.stderr)
            continue
        script_path = os.path.join(base, script)
        if not os.path.lexists(script_path):
            raise SetError(f"{path}: {name}: no such script {script}")
        _check_script(script_path)
        device = t.get("device", "auto")
        if device not in ("cpu", "cuda", "auto"):
            raise SetError(f"{path}: {name}: device must be cpu, cuda or auto, not {device}")
        args = tuple(str(a) for a in args)
        try:
            timeout = float(t.get("timeout", 600))
            check_timeout(f"{path}: {name}: timeout", timeout)
        except (TypeError, ValueError):
            raise SetError(f"{path}: {name}: timeout must be a number of seconds, not {t.get('timeout')!r}")
        repros.append(Repro(name, (python, script_path, *args), device, timeout))
    return repros


def _check_script(script: str) -> None:
    """The same check `run` makes of its SCRIPT (repro.validate_script): a FIFO (which would hang every run), a
    folder named *.py or a symbolic link loop is refused before any run, never judged "reproduced"."""
    try:
        validate_script(script, syntax=False)
    except UsageFailure as exc:
        raise SetError(f"{script}: {exc}" if script not in str(exc) else str(exc))

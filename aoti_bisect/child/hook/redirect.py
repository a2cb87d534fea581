"""Which file a hooked run really compiles to and loads from (recorder.py calls in here; stdlib only).

Two redirections, each recorded in the load's or compile's event:
- a package the run did not build is loaded from the instrumented copy the harness built for this stage, when
  its content hash is a key of the JSON that AOTI_BISECT_REDIRECT names ({sha256: copy path});
- a package compiled to a path outside the run's folder (a fixed-path cache such as /tmp/model.pt2) is written
  to a private path inside it instead, and every later load of the requested path by any process of the run
  is served from there (the mapping is kept in the run folder's `private-packages.json`), so no other run and
  no other flag set ever sees what this run built, and this run never sees what another one left there.
"""
import json
import os

from . import atomic, contract

PRIVATE = "private-packages.json"


def _run_folder():
    return os.path.dirname(os.path.abspath(os.environ[contract.HOOK_ENV]))


def _private_map():
    try:
        with open(os.path.join(_run_folder(), PRIVATE)) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def private_path(requested):
    """Where a compile to `requested` (a real path) goes instead; None: it is inside the run folder already."""
    folder = _run_folder()
    if requested is None or requested == folder or requested.startswith(folder + os.sep):
        return None
    mapping = _private_map()
    target = mapping.get(requested) or os.path.join(folder, "packages", f"{len(mapping)}-{os.path.basename(requested)}")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    mapping[requested] = target
    with atomic.replacing(os.path.join(folder, PRIVATE)) as f:
        json.dump(mapping, f, indent=1)
    return target


def load_target(path, sha256):
    """(what to load instead, why) for a load of `path` (a real path or None) whose content hash is `sha256`."""
    private = _private_map().get(path) if path else None
    if private and os.path.isfile(private):
        return private, "private"
    mapping_file = os.environ.get(contract.REDIRECT_ENV)
    if not mapping_file or not sha256:
        return None, None
    with open(mapping_file) as f:
        copy = json.load(f).get(sha256)
    return (copy, "instrumented") if copy and os.path.isfile(copy) else (None, None)


def compile_kwargs(record, event, kwargs):
    """aoti_compile_and_package's kwargs with a package_path outside the run folder made private."""
    try:
        requested = event and event.get("path")
        target = private_path(requested)
        if target is None:
            return kwargs
        record.update(event, requested_path=requested, path=target, redirect="private")
        return {**kwargs, "package_path": target}
    except Exception as exc:  # the repro must run as without us: compile where it asked
        record.error(f"redirecting a compile: {type(exc).__name__}: {exc}")
        return kwargs


def load_args(record, event, args, kwargs, digest):
    """A load's (args, kwargs), its path replaced by the private or instrumented file to load instead."""
    try:
        if event is None:
            return args, kwargs
        target, why = load_target(event.get("path"), event.get("sha256"))
        if target is None:
            return args, kwargs
        fields = {"served_from": target, "redirect": why}
        if why == "private":  # what this run built: the load is of that file
            sha = digest(target, None)
            fields.update(sha256=sha, built_here=record.built.get(target) == sha)
        record.update(event, **fields)
        if args:
            return (target, *args[1:]), kwargs
        return args, {**kwargs, "path": target}
    except Exception as exc:
        record.error(f"redirecting a load: {type(exc).__name__}: {exc}")
        return args, kwargs

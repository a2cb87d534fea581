"""Reads a loaded package's constants (parameters, buffers, folded constants) inside the repro's process.

The level-2 printer never prints constants, so a NaN baked into a weight looks like a fault of the kernel
that reads it. The package loader (torch._C._aoti.AOTIModelPackageLoader) exposes no constant values, so this
opens a second container runner on a private copy of the package's wrapper .so (where aoti_compile_and_package
embeds the weights by default) and reads extract_constants_map: the values as built into the package. The
repro's own loaded model is never touched. Only counts and summary statistics are kept, never values.
Standard library at import time; torch is used only when the repro already imported it (it just loaded a
package). Every limit ends in a `skipped` reason, never an exception.
"""
import io
import json
import math
import shutil
import sys
import tempfile
import time
import zipfile

MAX_SO_BYTES = 2 << 30  # the .so holds every weight: opening a second copy costs that much memory again
MAX_NUMEL = 1 << 28  # per constant: a NaN scan makes a boolean mask of this many bytes
MAX_CONSTANTS = 4096  # rows kept in hook.json, which is rewritten whole after every event
BUDGET_S = 60.0


def read(path, data, model_name, scratch, live=None):
    """{"so": member, "constants": [row...], "skipped": reason or None} for the package at path (or in data).

    scratch: a folder under the run folder for the private copy of the .so, removed before returning.
    live: FQN -> the tensor the process's module holds now (the exported program this process compiled into
    the package shares its parameters and buffers with the user's module): each constant is compared with it,
    so a buffer changed after the build (the package keeps a stale copy) is named.
    """
    start = time.monotonic()
    torch = sys.modules.get("torch")
    if torch is None:
        return {"skipped": "torch is not imported in this process"}
    try:
        z = zipfile.ZipFile(path if data is None else io.BytesIO(data))
    except (OSError, zipfile.BadZipFile) as exc:  # the loader accepted it: not a package we can open
        return {"skipped": f"the package cannot be opened as a zip: {type(exc).__name__}: {exc}"[:300]}
    with z:
        members = [i for i in z.infolist() if i.filename.endswith(".wrapper.so")
                   and f"/data/aotinductor/{model_name}/" in i.filename]
        if not members:
            return {"skipped": f"no wrapper .so for model {model_name!r} in the package"}
        so = members[0]
        device = _device(z, so.filename)
        if so.file_size > MAX_SO_BYTES:
            return {"so": so.filename, "skipped": f"the wrapper .so is {so.file_size >> 20} MiB (limit "
                                                  f"{MAX_SO_BYTES >> 20} MiB)"}
        no_room = _no_room(torch, device, so.file_size)
        if no_room:
            return {"so": so.filename, "skipped": no_room}
        folder = tempfile.mkdtemp(prefix="constants-", dir=scratch)
        try:
            copy = z.extract(so, folder)
            runner = (torch._C._aoti.AOTIModelContainerRunnerCpu(copy, 1) if device == "cpu" else
                      torch._C._aoti.AOTIModelContainerRunnerCuda(copy, 1, "cuda"))
            fqns = runner.get_constant_names_to_original_fqns()
            tensors = runner.extract_constants_map(False)
            result = {"so": so.filename, "skipped": None, **_rows(torch, fqns, tensors, live or {})}
            del runner, tensors  # the second container's copy of the weights, on the device too
        except (RuntimeError, OSError, AttributeError) as exc:  # another torch's runner, a full disk
            return {"so": so.filename, "skipped": f"cannot open a runner on it: {type(exc).__name__}: {exc}"[:300]}
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # dlopen keeps its mapping of the removed file
    return {**result, "seconds": round(time.monotonic() - start, 3)}


def folded(torch, compiled, live):
    """[{"fqn", "stale"}] for each constant folded into the generated code (FQN -> the value compiled) whose
    module tensor differs now: the package computes with the old value and holds no copy that could be updated."""
    rows = []
    for fqn, value in compiled.items():
        now = live.get(fqn)
        stale = _stale(torch, value, now) if torch is not None and isinstance(now, torch.Tensor) else None
        if stale is not None:
            rows.append({"fqn": fqn, "stale": stale})
    return rows


def _no_room(torch, device, so_bytes):
    """Why a second container cannot be opened for this device here; None: it can. The second container holds
    its own copy of the weights, on the package's device: on a GPU that must fit twice over in what is free, so
    that the repro's own allocations never fail because of us."""
    if device == "cpu":
        return None
    if device != "cuda":
        return f"a {device or 'unknown-device'} package: only CPU and CUDA packages are read"
    try:
        free, _total = torch.cuda.mem_get_info()
    except (RuntimeError, AttributeError, AssertionError) as exc:  # a CPU-only torch, no visible GPU
        return f"a cuda package, and no CUDA device to read it on: {type(exc).__name__}: {exc}"[:300]
    if free < 2 * so_bytes:
        return f"a cuda package whose weights ({so_bytes >> 20} MiB) do not fit twice in the GPU's free memory"
    return None


def _device(z, so_member):
    try:
        meta = json.loads(z.read(so_member[: -len(".so")] + "_metadata.json"))
    except (KeyError, ValueError):
        return None
    return meta.get("AOTI_DEVICE_KEY")


def _rows(torch, fqns, tensors, live):
    """One row per constant the wrapper declares: the values of those the .so holds, or why not."""
    name_of = {fqn or name: name for name, fqn in fqns.items()}  # extract_constants_map is keyed by FQN
    keys = list(dict.fromkeys([*tensors, *name_of]))
    start = time.monotonic()
    rows = []
    for key in keys[:MAX_CONSTANTS]:
        row = {"fqn": key if fqns.get(name_of.get(key, key)) else None, "name": name_of.get(key, key)}
        tensor = tensors.get(key)
        if tensor is None:
            row["skipped"] = "not in the .so (kept outside it, or left for the repro to load)"
        elif time.monotonic() - start > BUDGET_S:
            row["skipped"] = f"time budget of {BUDGET_S:.0f} s spent"
        else:
            row.update(stats(torch, tensor))
            if key in live and "skipped" not in row:
                row["stale"] = _stale(torch, tensor, live[key])
        rows.append(row)
    left = len(keys) - len(rows)
    return {"constants": rows, "left_out": left}


def stats(torch, tensor):
    row = {"dtype": str(tensor.dtype).replace("torch.", ""), "shape": list(tensor.shape), "numel": tensor.numel()}
    if tensor.numel() > MAX_NUMEL:
        return {**row, "skipped": f"{tensor.numel()} elements (limit {MAX_NUMEL})"}
    with torch.no_grad():
        t = tensor.detach()
        if t.is_complex():
            t = torch.view_as_real(t)
        if t.is_floating_point():
            nan = int(torch.isnan(t).sum())
            posinf = int(torch.isposinf(t).sum())
            neginf = int(torch.isneginf(t).sum())
            finite = t[torch.isfinite(t)].double()
        else:
            nan = posinf = neginf = 0
            finite = t.double() if t.dtype != torch.bool else t.to(torch.float64)
        row.update(nan=nan, posinf=posinf, neginf=neginf)
        if finite.numel():
            row.update(min=_num(finite.min()), max=_num(finite.max()), mean=_num(finite.mean()))
        if t.dtype != torch.bool:
            # Finite but outside an op's domain (a negative variance under rsqrt, a zero divisor): the count and
            # the first such element, so the report can say `bn.running_var[5] = -0.3`.
            row.update(_first(torch, t, t < 0, "negative"), **_first(torch, t, t == 0, "zero"))
            if finite.numel():
                # Where the largest value sits: an index made of this constant names the element that takes it
                # past a bound (`offsets[2] = 55`).
                row["first_max"] = _first(torch, t, t == finite.max().to(t.dtype), "max").get("first_max")
    return row


def _stale(torch, packaged, current):
    """How the package's copy differs from the module's tensor now: None where they are equal; else how many
    elements differ, the largest difference and the first differing element's index and both values."""
    with torch.no_grad():
        now = current.detach()
        if now.shape != packaged.shape or now.dtype != packaged.dtype:
            return {"shape": list(now.shape), "dtype": str(now.dtype).replace("torch.", "")}
        now = now.to(packaged.device)
        differ = ~((now == packaged) | (torch.isnan(now) & torch.isnan(packaged))) if now.is_floating_point() \
            else now != packaged
        count = int(differ.sum())
        if not count:
            return None
        flat = int(torch.nonzero(differ.reshape(-1))[0])
        diff = (now.double() - packaged.double()).abs()
        index = [int(i) for i in torch.unravel_index(torch.tensor(flat), now.shape)] if now.dim() else []
        return {"differ": count, "max_abs_diff": _num(diff[differ].max()), "index": index,
                "package": _num(packaged.reshape(-1)[flat]), "module": _num(now.reshape(-1)[flat])}


def _first(torch, t, mask, what):
    count = int(mask.sum())
    if not count:
        return {what: 0}
    flat = int(torch.nonzero(mask.reshape(-1))[0])
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), t.shape)] if t.dim() else []
    return {what: count, f"first_{what}": {"index": index, "value": _num(t.reshape(-1)[flat])}}


def _num(t):
    value = float(t)
    return value if math.isfinite(value) else None

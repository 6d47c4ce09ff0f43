"""Probes and verifies: a check split so that the grade is decided outside the process that ran the student's code.

A check cell of a notebook writes each check as two functions and one call, ``verify_X(probe_X(student_thing))``:

- ``probe_X(thing, ..., seed=...)`` runs in the kernel, beside the student's code: it calls the student's function
  or class on inputs made from ``seed`` (and, for a layer, loads weights made from ``seed`` into it, so that a
  degenerate layer cannot agree with itself) and returns plain values: tensors of exact type ``torch.Tensor``,
  numbers, strings, booleans, ``None``, and lists, tuples and string-keyed dicts of those;
- ``verify_X(values, seed=...)`` asserts on those values alone. It never calls the student's code: it rebuilds the
  inputs from ``seed`` and computes what is expected itself.

In the notebook the call gives the student the same feedback as ever. The grader (``helpers.course.exercises``)
also runs each probe of the reference's check cells with a seed of its own (fresh for each grading run), saves what
it returns with :func:`save`, and after the kernel's processes are gone runs :func:`verify_saved` in its own
process, which never ran a line of the student's (the kernel is another process): the reference notebook's check
cells, read from the course's own file before the kernel started, have their ``def``s and imports executed, and
each ``verify_X`` judges the saved values. What the kernel says about a cell
can only fail an exercise, never pass it; a value of another type (a subclass of ``torch.Tensor``, a proxy) is
refused by name when it is saved, and a file that is not what :func:`save` writes is refused when it is read.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

PLAIN = (bool, int, float, str, type(None))
VERIFY_PREFIX, PROBE_PREFIX = "verify_", "probe_"


class RefusedValue(TypeError):
    """A probe returned something that is not plain data."""


def _flatten(value, tensors: dict[str, torch.Tensor], where: str):
    """``value`` as JSON, each tensor replaced by a reference into ``tensors``; anything else is refused by name."""
    kind = type(value)
    if kind is torch.Tensor:
        key = f"t{len(tensors)}"
        tensors[key] = value.detach().to("cpu").contiguous().clone()
        return {"__tensor__": key}
    if isinstance(value, torch.Tensor):
        raise RefusedValue(
            f"{where}: a {kind.__qualname__}, a subclass of torch.Tensor, is refused: return a plain tensor"
        )
    if kind in PLAIN:
        if kind is float and not math.isfinite(value):
            return {"__float__": repr(value)}
        return value
    if kind in (list, tuple):
        return {"__" + kind.__name__ + "__": [_flatten(v, tensors, f"{where}[{i}]") for i, v in enumerate(value)]}
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise RefusedValue(f"{where}: a dict's keys must be strings")
        return {"__dict__": {k: _flatten(v, tensors, f"{where}[{k!r}]") for k, v in value.items()}}
    raise RefusedValue(f"{where}: a {kind.__module__}.{kind.__qualname__} is refused: a probe returns plain values")


def save(path: str | Path, values) -> None:
    """Write a probe's ``values`` to ``path`` (JSON) and ``path.safetensors`` (its tensors)."""
    tensors: dict[str, torch.Tensor] = {}
    tree = _flatten(values, tensors, "the probe's value")
    path = Path(path)
    save_file(tensors, str(path) + ".safetensors")
    path.write_text(json.dumps(tree), encoding="utf-8")


def _unflatten(tree, tensors: dict[str, torch.Tensor]):
    if type(tree) in PLAIN:
        return tree
    if type(tree) is not dict or len(tree) != 1:
        raise RefusedValue(f"not what save writes: {str(tree)[:80]}")
    ((kind, inner),) = tree.items()
    if kind == "__tensor__":
        tensor = tensors[inner]
        if type(tensor) is not torch.Tensor:
            raise RefusedValue(f"{type(tensor).__qualname__} is not a plain tensor")
        return tensor
    if kind == "__float__":
        return float(inner)
    if kind in ("__list__", "__tuple__"):
        items = [_unflatten(v, tensors) for v in inner]
        return items if kind == "__list__" else tuple(items)
    if kind == "__dict__":
        return {str(k): _unflatten(v, tensors) for k, v in inner.items()}
    raise RefusedValue(f"not what save writes: {kind}")


def load(path: str | Path):
    """What :func:`save` wrote, as plain values (tensors of exact type ``torch.Tensor``)."""
    path = Path(path)
    tensors = load_file(str(path) + ".safetensors")
    return _unflatten(json.loads(path.read_text(encoding="utf-8")), tensors)


# ----------------------------------------------------------------------------------------------
# the probes in a notebook's check cells


@dataclass
class ProbeCall:
    """One ``verify_X(probe_X(args))`` of a check cell: the probe's call (source) and the verify's name."""

    probe: str  # "probe_attention(attention)": the call as written, without the seed
    verify: str  # "verify_attention"
    name: str  # "attention": what X names


def probe_calls(source: str) -> list[ProbeCall]:
    """The ``verify_X(probe_X(...))`` statements at the top level of a check cell's source, in order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.args):
            continue
        inner = call.args[0]
        if not (call.func.id.startswith(VERIFY_PREFIX) and isinstance(inner, ast.Call)):
            continue
        if isinstance(inner.func, ast.Name) and inner.func.id == PROBE_PREFIX + call.func.id[len(VERIFY_PREFIX) :]:
            name = call.func.id[len(VERIFY_PREFIX) :]
            found.append(ProbeCall(ast.get_source_segment(source, inner), call.func.id, name))
    return found


def probe_statement(call: ProbeCall, path: str | Path, seed: int) -> str:
    """What the grader runs in the kernel: the probe with the grader's seed, its values saved to ``path``."""
    return (
        f"import helpers.course.probes as _tbb_probes\n"
        f"_tbb_probes.save({str(path)!r}, {call.probe[:-1].rstrip()}{', ' if not call.probe.endswith('()') else ''}"
        f"seed={seed}))"
    )


def definitions(check_sources: list[str], import_sources: list[str] = ()) -> str:
    """What the verifier executes (nothing that runs): the top-level imports of ``import_sources`` (the reference
    notebook's code cells) and of the check cells, then the check cells' ``def``s."""
    imports, defs = [], []
    for source in [*import_sources, *check_sources]:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                imports.append(ast.get_source_segment(source, node))
            elif isinstance(node, ast.FunctionDef) and source in check_sources:
                defs.append(ast.get_source_segment(source, node))
    return "\n".join(dict.fromkeys(imports)) + "\n\n" + "\n\n".join(defs)


VERIFIER_PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


def verify_saved(check_sources: list[str], jobs: list[dict], import_sources: list[str] = ()) -> list[dict]:
    """Run each job's ``verify`` on its saved values; the verdicts, in order.

    ``check_sources`` are the reference notebook's check cells (the course's own text; ``import_sources`` its other
    code cells, whose top-level imports the verifies may use); ``jobs`` are dicts with
    ``verify`` (a name), ``path`` (what :func:`save` wrote) and ``seed``. Each verdict is the job with ``ok`` and,
    when not ok, ``message`` (the failing assert's message, or why the values were refused).
    """
    namespace: dict = {"__name__": "__verifier__"}
    code = VERIFIER_PRELUDE + definitions(check_sources, import_sources)
    exec(compile(code, "<reference checks>", "exec"), namespace)
    verdicts = []
    for job in jobs:
        try:
            values = load(job["path"])
        except FileNotFoundError:
            verdicts.append({**job, "ok": False, "message": "the probe saved no values (it raised, or never ran)"})
            continue
        except Exception as err:  # noqa: BLE001  (anything the kernel wrote: refused, whatever it was)
            verdicts.append({**job, "ok": False, "message": f"the probe's values were refused: {err}"})
            continue
        try:
            namespace[job["verify"]](values, seed=job["seed"])
        except Exception as err:  # noqa: BLE001  (a failed assert, or values of the wrong shape)
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            verdicts.append({**job, "ok": False, "message": f"{type(err).__name__}: {message}"})
        else:
            verdicts.append({**job, "ok": True})
    return verdicts

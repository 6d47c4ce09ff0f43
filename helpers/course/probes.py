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
import contextlib
import json
import math
import os
import signal
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load as load_bytes
from safetensors.torch import save_file

from . import guard

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
    if kind.__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return _flatten(value.item(), tensors, where)  # a NumPy scalar: its Python number
    if kind.__module__ == "numpy" and kind.__name__ == "ndarray":
        return {"__ndarray__": _flatten(torch.from_numpy(value.copy()), tensors, where)}
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
    if kind == "__ndarray__":
        return _unflatten(inner, tensors).numpy()
    if kind in ("__list__", "__tuple__"):
        items = [_unflatten(v, tensors) for v in inner]
        return items if kind == "__list__" else tuple(items)
    if kind == "__dict__":
        return {str(k): _unflatten(v, tensors) for k, v in inner.items()}
    raise RefusedValue(f"not what save writes: {kind}")


def load(path: str | Path):
    """What :func:`save` wrote, as plain values (tensors of exact type ``torch.Tensor``)."""
    path = Path(path)
    tensors = load_bytes(_read_plain_file(Path(str(path) + ".safetensors")))
    return _unflatten(json.loads(_read_plain_file(path).decode("utf-8")), tensors)


_ABSENT = object()  # no such entry (a job without "taken"; an attribute torch.Tensor inherits)


# the most a probe's file may hold. The course's largest is a few hundred kB (RESULTS.md, "The verifier's
# limits"); the kernel may fill most of the machine's memory, and the grader, which reads the file into its own, may
# be grading several submissions at once
MAX_VALUE_BYTES = 64 << 20


def _read_plain_file(path: Path) -> bytes:
    """A regular file's bytes, never through a link (the kernel could point one at a file it may not read) nor from
    a FIFO or a device (which would block or never end), nor more than :data:`MAX_VALUE_BYTES` of them."""
    limit = MAX_VALUE_BYTES
    # no link followed, and no wait: a FIFO the kernel left there would block a plain open until a writer came
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RefusedValue(f"{path.name} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)  # never the whole of a file that grew after a size was read
        if len(data) > limit:
            raise RefusedValue(
                f"{path.name} holds more than {limit:,} bytes: the probe returned far more than the check asks for"
            )
        return data
    finally:
        os.close(fd)


def take(path: str | Path) -> dict | None:
    """What :func:`save` wrote at ``path``, read into this process and removed from the folder: the grader takes a
    probe's values the moment its cell ends, so that nothing the kernel runs later (once the guard is down) can write
    others in their place. None when the probe saved nothing; a link or another kind of file is refused."""
    path = Path(path)
    files = (path, Path(str(path) + ".safetensors"))
    try:
        if not all(os.path.lexists(f) for f in files):
            return None
        return {"json": _read_plain_file(files[0]), "tensors": _read_plain_file(files[1])}
    except (OSError, RefusedValue) as err:
        return {"refused": f"{type(err).__name__}: {err}"}
    finally:
        for f in files:
            with contextlib.suppress(OSError):
                f.unlink()


def load_taken(taken: dict | None):
    """The plain values of what :func:`take` read (refused as :func:`load` refuses a file; None: nothing saved)."""
    if taken is None:
        raise FileNotFoundError("the probe saved no values")
    if "refused" in taken:
        raise RefusedValue(taken["refused"])
    return _unflatten(json.loads(taken["json"].decode("utf-8")), load_bytes(taken["tensors"]))


# ----------------------------------------------------------------------------------------------
# comparisons that do not broadcast, while the verifier judges


def _same_shapes(name: str, a, b) -> None:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape != b.shape:
        raise AssertionError(
            f"{name} compared a tensor of shape {tuple(a.shape)} with one of shape {tuple(b.shape)}: the shapes must "
            "be the same (broadcasting would let an empty or smaller tensor agree)"
        )


def close(actual, expected, **tolerances) -> bool:
    """``torch.allclose(actual, expected, **tolerances)`` for tensors of the same shape; an AssertionError naming both
    shapes otherwise. The notebooks' checks compare with it, so that a wrong shape that broadcasts (a (1, T) tensor
    for a (T,) one, an empty one for anything) fails the check in the notebook as it does in the grader, while the
    student's own code keeps torch's comparisons."""
    _same_shapes("the check", actual, expected)
    return torch.allclose(actual, expected, **tolerances)


@contextlib.contextmanager
def strict_comparisons():
    """``torch.allclose`` and ``torch.isclose`` (functions and methods) refuse tensors of different shapes while a
    verify runs in the grader's process (the notebooks' checks compare with :func:`close`; this is the net under a
    comparison written otherwise). Both broadcast: a tensor with a dimension of size 0 is "close" to
    anything, and a smaller tensor to any tensor it broadcasts to. The verifies compare what the student's code
    returned with what they computed, which must have the same shape; :func:`torch.testing.assert_close` and
    :func:`torch.equal` check shapes already."""
    saved = []
    for owner in (torch, torch.Tensor):
        for name in ("allclose", "isclose"):
            original = getattr(owner, name)
            saved.append((owner, name, vars(owner).get(name, _ABSENT)))

            def strict(a, b, *args, _original=original, _name=name, **kwargs):
                _same_shapes(f"torch.{_name}", a, b)
                return _original(a, b, *args, **kwargs)

            setattr(owner, name, strict)
    try:
        yield
    finally:
        for owner, name, before in reversed(saved):
            if before is _ABSENT:
                delattr(owner, name)  # inherited (torch.Tensor's methods): the base class's shows again
            else:
                setattr(owner, name, before)


class VerifyTooLong(BaseException):  # noqa: N818  (not an Exception: a verify's `except Exception` lets it by)
    """A verify ran past its time limit (:func:`time_limit`)."""


def can_limit_time() -> bool:
    """Whether :func:`time_limit` can stop a block here: a system with interval timers (not Windows), the main
    thread (where Python runs signal handlers), and no other timer of this process's running."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Stop the Python code in this block after ``seconds`` with :class:`VerifyTooLong` (None, or where
    :func:`can_limit_time` is False: no limit).

    A verify's code is the course's, but the values it loops over are the student's, and nothing else bounds the
    grader's own process (the kernel's cells have their time limit): values far larger than the check asked for must
    cost that exercise, not hang the class's grading. The stop is SIGALRM's handler, which Python runs in the main
    thread between two operations (one long torch call ends first). It raises again every second until the block is
    left, so a handler in the block that swallows it cannot run on, and the block still counts as too long.
    (A timer thread raising into this one, tried before, left a stray timer that re-raised after the block: here the
    timer is stopped and the handler put back in a ``finally`` that the stop cannot cut short.)"""
    if seconds is None or not can_limit_time():
        yield
        return
    state = {"running": True, "fired": False}

    def stop(signum, frame):
        if state["running"]:
            state["fired"] = True
            signal.setitimer(signal.ITIMER_REAL, 1.0)  # again, should the block swallow this one
            raise VerifyTooLong(f"stopped after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, seconds)
            yield
        finally:
            state["running"] = False  # a stop that lands before this line ends up in the outer finally
    finally:
        state["running"] = False
        signal.setitimer(signal.ITIMER_REAL, 0)  # the next stop is a second away: none comes between these lines
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
    if state["fired"]:  # swallowed where it landed, and the block then ended: still too long
        raise VerifyTooLong(f"stopped after {seconds:g} s")


# ----------------------------------------------------------------------------------------------
# record and replay: a check written as one function, split without writing it twice


class _Recorder:
    """Calls the student's ``fn`` and keeps a plain copy of each result (attributes are ``fn``'s own)."""

    def __init__(self, fn):
        self._fn, self.results = fn, []

    def __call__(self, *args, **kwargs):
        result = self._fn(*args, **kwargs)
        _flatten(result, {}, f"what {getattr(self._fn, '__name__', 'it')} returned")  # refused here, by name
        self.results.append(result)
        return result

    def __getattr__(self, name):
        return getattr(self._fn, name)


class _Replayer:
    """Returns the recorded results in order, whatever it is called with; refuses a call it has no result for."""

    def __init__(self, results):
        self._results = list(results)

    def __call__(self, *args, **kwargs):
        if not self._results:
            raise AssertionError("the check called the function more often than the probe did: other inputs?")
        return self._results.pop(0)


def record(check, fn, *args, **kwargs) -> list:
    """Run ``check(fn, *args, **kwargs)`` (the check's own asserts included: the notebook's feedback) and return what
    each call of ``fn`` returned: the probe of a check written as one function (``check(fn, ..., seed=...)``)."""
    recorder = _Recorder(fn)
    check(recorder, *args, **kwargs)
    return recorder.results


def replay(check, results: list, *args, **kwargs) -> None:
    """Run ``check`` again with ``fn``'s recorded ``results`` in its place: the verify of such a check. The check
    draws its inputs again from the same seed and computes what it expects itself (in the grader, with the
    reference's own functions), so recorded results for other inputs fail it."""
    replayer = _Replayer(results)
    check(replayer, *args, **kwargs)
    assert not replayer._results, "the probe recorded more calls than the check makes: other inputs?"


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
    """What the grader runs in the kernel: the probe with the grader's seed, its values saved to ``path``; compiled
    under the guard's probe file name, so that a reference the probe reaches with no frame of the student's or the
    package's on the way is refused (:func:`helpers.course.guard._called_from_student`)."""
    statement = (
        f"import helpers.course.probes as _tbb_probes\n"
        f"_tbb_probes.save({str(path)!r}, {call.probe[:-1].rstrip()}{', ' if not call.probe.endswith('()') else ''}"
        f"seed={seed}))"
    )
    return f"exec(compile({statement!r}, {guard.PROBE_FILE + ' ' + Path(path).stem + '>'!r}, 'exec'), globals())"


def _calls_nothing(node: ast.AST) -> bool:
    return not any(isinstance(n, ast.Call | ast.Await | ast.Yield | ast.YieldFrom) for n in ast.walk(node))


VERIFIER_TAG = "verifier"  # a cheap set-up cell the checks rely on: the verifier runs all of it (but bare expressions)


def definitions(sources: list[str], whole: set[int] = frozenset()) -> list[str]:
    """What the verifier executes of the reference notebook's code cells (``sources``, in order): the top-level
    imports, ``def``s and classes, and the assignments that call nothing (constants such as ``DTYPE = torch.float64``);
    of the cells whose index is in ``whole`` (tagged :data:`VERIFIER_TAG`: cheap set-up such as the keys a check
    uses), every top-level statement but bare expressions. Nothing else runs: no data is loaded, no model trained,
    nothing printed. The reference's own solutions are among the ``def``s, so a verify that needs an auxiliary result
    (the copying query of an earlier exercise, say) gets the reference's in the grader, the student's in the
    notebook."""
    kept = []
    for index, source in enumerate(sources):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if index in whole and not isinstance(node, ast.Expr):
                kept.append(ast.get_source_segment(source, node))
            elif isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef) or (
                isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _calls_nothing(node.value)
            ):
                kept.append(ast.get_source_segment(source, node))
    return kept


VERIFY_SECONDS = 300  # the course's slowest verify takes a few seconds (RESULTS.md, "The verifier's limits")
VERIFIER_PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


def verify_saved(
    sources: list[str],
    jobs: list[dict],
    *,
    whole: set[int] = frozenset(),
    quick: bool = True,
    seconds: float | None = VERIFY_SECONDS,
) -> list[dict]:
    """Run each job's ``verify`` on its saved values; the verdicts, in order.

    ``sources`` are the reference notebook's code cells, in order (the course's own text, read before the kernel
    started): :func:`definitions` picks what the verifier executes (``whole``: the cells it runs whole). ``jobs`` are dicts with ``verify`` (a name),
    ``path`` (what :func:`save` wrote) and ``seed``, and ``taken`` where the grader took the values the moment the probe
    ended (:func:`take`; then the folder is not read again). Each verify runs under :func:`strict_comparisons` and
    :func:`time_limit` (``seconds``). Each verdict is the job with ``ok`` and, when not ok,
    ``message`` (the failing assert's message, or why the values were refused).
    """
    namespace: dict = {"__name__": "__verifier__", "QUICK": quick}  # the mode the probes ran in
    exec(compile(VERIFIER_PRELUDE, "<verifier>", "exec"), namespace)
    for statement in definitions(sources, whole):
        try:  # one that needs what was not executed (a default computed by a call) is left out
            exec(compile(statement, "<reference checks>", "exec"), namespace)
        except Exception:  # noqa: BLE001, S112
            continue
    verdicts = []
    for job in jobs:
        if job["verify"] not in namespace:
            verdicts.append({**job, "ok": False, "message": f"the reference defines no {job['verify']}"})
            continue
        taken = job.get("taken", _ABSENT)
        job = {k: v for k, v in job.items() if k != "taken"}  # a verdict carries no bytes
        try:
            values = load(job["path"]) if taken is _ABSENT else load_taken(taken)
        except FileNotFoundError:
            verdicts.append({**job, "ok": False, "message": "the probe saved no values (it raised, or never ran)"})
            continue
        except Exception as err:  # noqa: BLE001  (anything the kernel wrote: refused, whatever it was)
            verdicts.append({**job, "ok": False, "message": f"the probe's values were refused: {err}"})
            continue
        try:
            with strict_comparisons(), time_limit(seconds):
                namespace[job["verify"]](values, seed=job["seed"])
        except VerifyTooLong:
            verdicts.append({**job, "ok": False, "message": f"the check ran longer than {seconds:g} s on the "
                             "probe's values: are they far larger than the exercise asks for?"})  # fmt: skip
            continue
        except Exception as err:  # noqa: BLE001  (a failed assert, or values of the wrong shape)
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            verdicts.append({**job, "ok": False, "message": f"{type(err).__name__}: {message}"})
        else:
            verdicts.append({**job, "ok": True})
    return verdicts

"""What keeps a grade honest while a student's solution runs: the package's own answer out of reach, no patching.

The student copy ships with ``helpers``, which holds a reference implementation of most exercises, and the
student's cells run in the same interpreter as the checks. Two tricks would otherwise earn full marks without
solving anything (both were tried on Exercise 2.1): calling the package's implementation
(``from helpers.nn.model import sinusoidal_table``), or patching what the checks use
(``builtins.abs = lambda x: 0.0``). While the grader runs an exercise (its solution cells, then its checks):

- each package function that implements the exercise (:data:`REFERENCES`) is replaced by a stand-in that raises
  :class:`ReferenceOutOfReach` when it is called *directly from the student's code* (a frame compiled from one
  of the student's cells, whose file name starts with :data:`STUDENT_FILE`); the checks, the notebook's own cells
  and the package's other functions still reach it;
- the functions and classes of Python's builtins, ``math``, ``operator``, ``random``, ``torch`` (with
  ``torch.Tensor``, ``torch.nn.functional``, ``torch.testing``), ``numpy`` and every loaded ``helpers`` module
  are noted before the exercise starts and compared after each of its cells: one replaced, added or deleted is
  put back and the exercise fails with :class:`TamperError`, naming it.

The grader sends :func:`begin`, :func:`verify` and :func:`end` to the kernel as cells of their own, so the
same code guards a Jupyter kernel and the in-process executor of the tests.
"""

from __future__ import annotations

import functools
import importlib
import sys
import types

STUDENT_FILE = "<student"  # the file name the grader compiles a student's solution cell under

# exercise -> the package functions that implement it (module path, attribute)
REFERENCES: dict[str, list[str]] = {
    "2.1": ["helpers.nn.model.sinusoidal_table"],
}

_WATCHED_MODULES = ("builtins", "math", "operator", "random", "torch", "torch.nn.functional", "torch.testing", "numpy")
_IGNORED_NAMES = {"_", "__", "___", "input", "raw_input"}  # what an interactive prompt (ipykernel) rebinds per cell


class ReferenceOutOfReach(RuntimeError):
    """A solution called the package's own implementation of the exercise being graded."""


class TamperError(RuntimeError):
    """A solution replaced, added or deleted a function of Python, torch, numpy or the course package."""


def _is_code(value) -> bool:
    return callable(value) and not isinstance(value, types.ModuleType)


def _namespaces() -> dict[str, dict]:
    spaces = {}
    for name in _WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            spaces[name] = vars(module)
    torch = sys.modules.get("torch")
    if torch is not None:
        spaces["torch.Tensor"] = torch.Tensor.__dict__
    for name, module in list(sys.modules.items()):
        if (name == "helpers" or name.startswith("helpers.")) and module is not None:
            spaces[name] = vars(module)
    return spaces


def _snapshot() -> dict[str, dict[str, object]]:
    return {
        where: {k: v for k, v in space.items() if _is_code(v) and k not in _IGNORED_NAMES}
        for where, space in _namespaces().items()
    }


def _called_from_student(frame) -> bool:
    return frame is not None and frame.f_code.co_filename.startswith(STUDENT_FILE)


def _out_of_reach(original, exercise: str, dotted: str):
    @functools.wraps(original)
    def stand_in(*args, **kwargs):
        if _called_from_student(sys._getframe(1)):
            raise ReferenceOutOfReach(
                f"Exercise {exercise}: {dotted} is the course's own implementation and is out of reach while your "
                "solution is graded. Write the code yourself."
            )
        return original(*args, **kwargs)

    del stand_in.__wrapped__  # not a way back to the original
    return stand_in


class _State:
    exercise: str | None = None
    saved: dict[str, dict[str, object]] = {}
    poisoned: list[tuple[object, str, object]] = []


def _resolve(dotted: str) -> tuple[object, str]:
    module_name, attribute = dotted.rsplit(".", 1)
    return importlib.import_module(module_name), attribute


def begin(exercise: str) -> None:
    """Before an exercise's first cell: put its references out of the student's reach and note what is watched."""
    end()
    for dotted in REFERENCES.get(exercise, []):
        owner, attribute = _resolve(dotted)
        original = getattr(owner, attribute)
        _State.poisoned.append((owner, attribute, original))
        setattr(owner, attribute, _out_of_reach(original, exercise, dotted))
    _State.exercise = exercise
    _State.saved = _snapshot()


def _restore(changes: list[tuple[str, str, object]]) -> None:
    spaces = _namespaces()
    for where, name, value in changes:
        owner = sys.modules.get(where) if where != "torch.Tensor" else sys.modules["torch"].Tensor
        if owner is None:
            continue
        if value is _MISSING:
            if name in spaces.get(where, {}):
                delattr(owner, name)
        else:
            setattr(owner, name, value)


_MISSING = object()


def verify() -> None:
    """After each cell of the exercise: anything watched that changed is put back, and the exercise fails."""
    if _State.exercise is None:
        return
    now = _snapshot()
    changes = []  # (namespace, name, the value to put back)
    for where, before in _State.saved.items():
        after = now.get(where, {})
        changes += [(where, k, v) for k, v in before.items() if after.get(k, _MISSING) is not v]
        changes += [(where, k, _MISSING) for k in after if k not in before]
    if not changes:
        return
    _restore(changes)
    names = [f"{where}.{name}" for where, name, _ in changes]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    raise TamperError(
        f"Exercise {_State.exercise}: the solution changed {shown}. A solution may not replace functions of Python, "
        "torch, numpy or the course package (they are put back); compute the answer instead."
    )


def end() -> None:
    """After an exercise: its references are the package's own again."""
    for owner, attribute, original in reversed(_State.poisoned):
        setattr(owner, attribute, original)
    _State.poisoned, _State.exercise, _State.saved = [], None, {}


def student_source(source: str, label: str) -> str:
    """A student's cell wrapped to run under a file name the guard recognises (in a kernel: a cell of its own)."""
    return f"exec(compile({source!r}, {(STUDENT_FILE + ' ' + label + '>')!r}, 'exec'), globals())"

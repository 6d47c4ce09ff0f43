"""Issue 50: a determined student's tricks, graded as instructors grade (a Jupyter kernel, ``helpers grade``).

Each trick is planted in a student copy of notebook 02 (the stubs everywhere else), then graded:

- one line that clears every cell's error (an IPython ``post_run_cell`` hook): with the verdict taken from the kernel
  (the control: the probes switched off, as the grader was) it earned the whole notebook; judged outside, nothing;
- the guard switched off and ``torch.allclose`` patched; a tensor subclass whose ``allclose`` always agrees;
- ``os._exit(0)`` in a solution (the kernel dies) and ``while True: pass`` (the cell's time limit): each fails its own
  exercise, a fresh kernel takes the reference's state, and the exercises after it are graded;
- a detached process that rewrites the ``--json`` file after the grader has written it: it is killed first.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import pytest

from helpers.course import exercises, notebooks, probes
from tests.environments import clean_env

ROOT = Path(__file__).resolve().parents[2]
SOLVED = notebooks.notebook_sources(["02"])[0]

HOOK = 'get_ipython().events.register("post_run_cell", lambda result: setattr(result, "error_in_exec", None))'
GUARD_OFF = (
    "import helpers.course.guard as _g, torch as _t\n_g.end()\n_g.verify = lambda: None\n"
    "_t.allclose = lambda *a, **k: True\n"
)
LYING = """
class LyingTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True if func is torch.allclose else super().__torch_function__(func, types, args, kwargs or {})
"""
DAEMON = """
import os, sys, time
if os.fork() == 0:  # detach: a new session, then a grandchild that outlives its parent
    os.setsid()
    if os.fork() == 0:
        time.sleep(4)
        open({path!r}, "w").write('{{"total": 999}}')
    os._exit(0)
"""


def _copy(tmp_path: Path, cells: dict[str, tuple[str, str]] | None = None, solved: tuple[str, ...] = ()) -> Path:
    """A student copy of notebook 02: stubs, except ``cells`` (exercise -> (code put first in its first solution
    cell, {stub: replacement})) and the exercises in ``solved`` (the reference's cells)."""
    copy = exercises.student_notebook(notebooks.read_py(SOLVED))
    reference = notebooks.read_py(SOLVED)
    found = {ex.number: ex for ex in exercises.find_exercises(copy, solved=False)}
    ref_found = {ex.number: ex for ex in exercises.find_exercises(reference)}
    for number in solved:
        for mine, theirs in zip(found[number].cells, ref_found[number].cells):
            copy.cells[mine].source = reference.cells[theirs].source
    for number, (first, replacements) in (cells or {}).items():
        index = next(i for i in found[number].cells if "NotImplementedError(" in copy.cells[i].source)
        source = copy.cells[index].source
        for stub, new in replacements.items():
            source = re.sub(stub, new, source, count=1)
        copy.cells[index].source = first + "\n" + source
    path = tmp_path / "02_copy.py"
    path.write_text(jupytext.writes(copy, fmt="py:percent"), encoding="utf-8")
    return path


@pytest.mark.grading  # notebook 02 in a kernel, twice (the control, then the grader)
def test_a_hook_that_clears_every_error_forged_the_kernel_s_verdict_and_earns_nothing_judged_outside(
    tmp_path, monkeypatch
):
    copy = _copy(tmp_path, {"2.1": (HOOK, {})})
    first = ["2.1", "2.2", "2.3"]  # the hook covers every cell after it: three exercises show it (and keep CI short)
    honest = exercises.grade(copy, reference=SOLVED, cell_timeout=120, stop_after=first[-1])
    assert [honest.status_of(n) for n in first] == ["failed"] * 3 and honest.total == 0, honest.table()
    assert {r.decided for r in honest.results} == {"verifier"}, "every exercise of 02 is judged outside"
    assert all("saved no values" in r.message for r in honest.results if r.status == "failed"), honest.table()
    # the control: the verdict from the kernel alone (no probe to judge outside, as the grader was before): the
    # stubs pass (on the whole notebook, before this change: 25/25)
    monkeypatch.setattr(probes, "probe_calls", lambda source: [])
    forged = exercises.grade(copy, reference=SOLVED, cell_timeout=120, stop_after=first[-1])
    assert [forged.status_of(n) for n in first] == ["passed"] * 3 and forged.total == 10, forged.table()


@pytest.mark.slow  # notebook 05 in a kernel (about a minute on 2 cores): the 02 test above runs in CI
def test_on_notebook_05_the_hook_earns_nothing_either(tmp_path):
    solved = notebooks.notebook_sources(["05"])[0]
    copy = exercises.student_notebook(notebooks.read_py(solved))
    first = exercises.find_exercises(copy, solved=False)[0]
    cell = next(i for i in first.cells if "NotImplementedError(" in copy.cells[i].source)
    copy.cells[cell].source = HOOK + "\n" + copy.cells[cell].source
    path = tmp_path / solved.name
    path.write_text(jupytext.writes(copy, fmt="py:percent"), encoding="utf-8")
    result = exercises.grade(path, reference=solved, cell_timeout=300)
    assert result.total == 0 and {r.decided for r in result.results} == {"verifier"}, result.table()


def _replace_stub(text: str, after: str, code: str) -> str:
    """``text`` with the first stub after ``after`` replaced by ``code`` (one line, the stub's indentation)."""
    start = text.index("raise NotImplementedError(", text.index(after))
    return text[:start] + code + text[text.index("\n", start) :]


# A helper attacking the grader (2026-12-07) earned Exercise 2.1 this way: the solution calls the package (the guard
# stops it while 2.1 runs, and a hook clears those errors); the hook also notes each probe the grader sends (its path
# and seed are in the cell), and once the guard is down, after 2.1's end(), runs them again and saves their values in
# the probes' folder, which the kernel may write. The grader read that folder only after the kernel was gone.
LATE_PROBES = """
import re as _re
_late = {"on": True, "jobs": []}


def _after_each_cell(result):
    if not _late["on"]:
        return
    source = getattr(result.info, "raw_cell", "") or ""
    found = _re.search(r"_tbb_probes\\.save\\('([^']+)', (probe_\\w+)\\(.*seed=(\\d+)\\)\\)", source)
    if found:
        _late["jobs"].append((found[1], found[2], int(found[3])))
    if source.endswith("_tbb_guard.end()"):
        _late["on"] = False
        from helpers.course import probes as _probes
        ns = get_ipython().user_ns
        for path, probe, seed in _late["jobs"]:
            fn = ns["sinusoidal_positions"] if probe == "probe_sinusoidal" else ns["rotate_pairs"]
            _probes.save(path, ns[probe](fn, seed=seed))
    result.error_in_exec = None


get_ipython().events.register("post_run_cell", _after_each_cell)
"""


@pytest.mark.grading  # notebook 02 in a kernel, through Exercise 2.1
def test_probe_values_saved_again_once_the_guard_is_down_count_for_nothing(tmp_path, monkeypatch):
    text = _copy(tmp_path).read_text(encoding="utf-8")
    text = _replace_stub(
        text,
        "def sinusoidal_positions",
        "from helpers.nn import model as _pkg\n    return _pkg.sinusoidal_table(max_len, d_model)",
    )
    text = _replace_stub(
        text, "def rotate_pairs", "from helpers.nn import model as _pkg\n    return _pkg.rotary(x, positions)"
    )
    text = text.replace("def sinusoidal_positions", LATE_PROBES + "\n\ndef sinusoidal_positions", 1)
    copy = tmp_path / "02_late.py"
    copy.write_text(text, encoding="utf-8")
    result = exercises.grade(copy, reference=SOLVED, cell_timeout=120, stop_after="2.1")
    assert result.status_of("2.1") == "failed" and result.results[0].decided == "verifier", result.table()
    assert "saved no values" in result.results[0].message, result.table()  # under the guard the probe raised
    # the control: the folder read when the verifier judges, once the kernel is gone (as before): the values the
    # hook saved after the guard came down earn the points
    monkeypatch.setattr(probes, "take", _ReadLater)
    late = exercises.grade(copy, reference=SOLVED, cell_timeout=120, stop_after="2.1")
    assert late.status_of("2.1") == "passed" and late.results[0].decided == "verifier", late.table()


class _ReadLater(dict):
    """What ``probes.take`` hands the verifier, read from the folder only when the verifier judges."""

    def __init__(self, path):
        super().__init__()
        self.path = Path(path)

    def __contains__(self, key):
        return False  # never "refused"

    def __getitem__(self, key):
        return (self.path if key == "json" else Path(f"{self.path}.safetensors")).read_bytes()


@pytest.mark.slow  # notebook 02 in a kernel, two restarts and a 10 s time limit (~25 s): -m slow; CI runs the hook test
def test_tricks_a_dead_kernel_and_a_hung_cell_each_cost_their_own_exercise_and_grading_goes_on(tmp_path):
    copy = _copy(
        tmp_path,
        {
            "2.2": (GUARD_OFF, {}),
            "2.3": (LYING, {}),
            "2.4": ("import os\nos._exit(0)", {}),
            "2.6": ("while True:\n    pass", {}),
        },
        solved=("2.1", "2.5"),
    )
    text = copy.read_text(encoding="utf-8")
    text = _replace_stub(
        text, "def attention(q, k, v, mask=None):", "return v, torch.zeros(q.shape[:-1] + k.shape[-2:-1])"
    )
    text = _replace_stub(
        text,
        "def forward(self, x, mask=None):",
        "return setattr(self, 'last_weights', x) or torch.zeros(x.shape).as_subclass(LyingTensor)",
    )
    copy.write_text(text, encoding="utf-8")
    lines = []
    result = exercises.grade(copy, reference=SOLVED, cell_timeout=10, echo=lines.append, stop_after="2.7")
    status = {r.number: (r.status, r.message) for r in result.results}
    assert result.total == 6 and status["2.1"][0] == status["2.5"][0] == "passed", result.table()  # 4 + 2 points
    assert [status[n][0] for n in ("2.2", "2.3", "2.4", "2.6")] == ["failed"] * 4, result.table()
    # allclose patched and the guard off: the kernel's check passed, the verifier's did not
    assert status["2.2"][1].startswith("AssertionError") and "judged outside the kernel" in status["2.2"][1]
    assert "LyingTensor, a subclass of torch.Tensor, is refused" in status["2.3"][1], result.table()
    assert status["2.4"][1].startswith("DeadKernelError: the kernel died"), result.table()
    assert status["2.6"][1].startswith("TimeoutError"), result.table()
    assert sum("restarting it with the reference's state" in line for line in lines) == 2, lines
    assert status["2.7"] == ("not attempted", "the stub is still in place"), "graded on after the second restart"


@pytest.mark.slow  # the grade command on notebook 02, in a kernel, then a wait (~20 s)
def test_a_detached_process_cannot_rewrite_the_grade_after_the_grader_wrote_it(tmp_path):
    out = tmp_path / "grade.json"
    copy = _copy(tmp_path, {"2.2": (DAEMON.format(path=str(out)), {})}, solved=("2.1",))
    done = subprocess.run(
        [sys.executable, "-m", "helpers", "grade", str(copy), "--json", str(out), "--sheet", str(tmp_path / "s.csv")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(ROOT)),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    written = json.loads(out.read_text(encoding="utf-8"))
    time.sleep(6)  # past the daemon's 4 s: it was killed with the kernel
    assert json.loads(out.read_text(encoding="utf-8")) == written and written["total"] == 2, written


@pytest.mark.slow  # notebook 02 in a kernel, up to 2.2
def test_the_control_without_the_kill_the_detached_process_rewrites_the_grade(tmp_path, monkeypatch):
    """The same copy graded with nothing killed but the kernel (jupyter_client ends the kernel's process group,
    which a daemon leaves with setsid): the file the grader wrote is rewritten behind its back."""
    from helpers.course import executors

    out = tmp_path / "grade.json"
    copy = _copy(tmp_path, {"2.2": (DAEMON.format(path=str(out)), {})}, solved=("2.1",))
    monkeypatch.setattr(executors, "kill_descendants", lambda keep=(), rounds=5: [])
    result = exercises.grade(copy, reference=SOLVED, stop_after="2.2", cell_timeout=120)
    out.write_text(json.dumps(result.to_dict()), encoding="utf-8")
    deadline = time.monotonic() + 15
    while json.loads(out.read_text(encoding="utf-8")).get("total") != 999 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert json.loads(out.read_text(encoding="utf-8")) == {"total": 999}

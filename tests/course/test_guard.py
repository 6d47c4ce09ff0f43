"""The grader's guard: the reference out of the student's reach, and nothing patched (helpers.course.guard)."""

from __future__ import annotations

import builtins
import json
import math

import pytest
import torch

from helpers.course import checks, guard
from helpers.nn import model as M


def _as_student(source: str, namespace: dict) -> None:
    exec(compile(source, guard.STUDENT_FILE + " test cell>", "exec"), namespace)


def _each_raises(namespace: dict, names, match: str, *args) -> None:
    """Each of the student's functions ``names``, called with ``args``, meets the guard."""
    for name in names:
        with pytest.raises(guard.ReferenceOutOfReach, match=match):
            namespace[name](*args)


@pytest.fixture
def guarded(monkeypatch):
    monkeypatch.setattr(guard, "REFERENCES", {"9.1": ["helpers.nn.model.sinusoidal_table"]})
    guard.begin("9.1")
    yield
    guard.end()


def test_the_reference_raises_for_the_students_code_and_answers_everyone_else(guarded):
    namespace = {}
    _as_student(
        "from helpers.nn.model import sinusoidal_table\ndef mine(n, d):\n    return sinusoidal_table(n, d)", namespace
    )
    with pytest.raises(guard.ReferenceOutOfReach, match="Exercise 9.1: helpers.nn.model.sinusoidal_table"):
        namespace["mine"](4, 6)
    assert M.sinusoidal_table(4, 6).shape == (4, 6)  # a check (or this test) still reaches it
    # through a library frame (a module's __call__), the first frame that is not a library's decides
    _as_student(
        "import torch\nclass Wrap(torch.nn.Module):\n    def forward(self, n):\n        return sinusoidal_table(n, 6)\n"
        "from helpers.nn.model import sinusoidal_table\n",
        namespace,
    )
    with pytest.raises(guard.ReferenceOutOfReach):
        namespace["Wrap"]()(4)


def test_a_checks_function_that_calls_the_reference_is_out_of_reach_for_the_student_and_not_for_the_check(guarded):
    """A check cell's function wrapping the reference (notebook 02's check once wrapped its loop reference so) must
    not be a way round the guard: called from the student's code it raises; called by the check, it answers. The
    package's own frames still decide (its model calls its attention when a check runs the model for the student)."""
    check_cell = {}
    exec(compile("def reference(n, d):\n    return sinusoidal_table(n, d)\n", "<check cell>", "exec"), check_cell)
    check_cell["sinusoidal_table"] = M.sinusoidal_table
    namespace = {"reference": check_cell["reference"]}
    _as_student("def mine(n, d):\n    return reference(n, d)", namespace)
    with pytest.raises(guard.ReferenceOutOfReach, match="Exercise 9.1"):
        namespace["mine"](4, 6)
    assert check_cell["reference"](4, 6).shape == (4, 6)  # the check itself
    _as_student(
        "from helpers.nn import model\ndef through_the_package(cfg):\n    return model.DecoderOnlyTransformer(cfg)",
        namespace,
    )
    cfg = M.ModelConfig(vocab_size=10, max_len=8, n_layer=1, n_head=2, d_model=8, positional="sinusoidal")
    assert namespace["through_the_package"](cfg).pos_table.shape == (8, 8)  # the package's frame decides


def test_after_the_exercise_the_reference_is_the_packages_own_again(guarded):
    before_end = M.sinusoidal_table
    guard.end()
    assert M.sinusoidal_table is not before_end and M.sinusoidal_table.__module__ == "helpers.nn.model"
    namespace = {}
    _as_student("from helpers.nn.model import sinusoidal_table\nout = sinusoidal_table(3, 4)", namespace)
    assert namespace["out"].shape == (3, 4)


def test_a_patched_builtin_or_torch_function_is_put_back_and_named(guarded):
    original_abs, original_allclose = builtins.abs, torch.allclose
    _as_student("import builtins, torch\nbuiltins.abs = lambda x: 0.0\ntorch.allclose = lambda *a, **k: True", {})
    with pytest.raises(guard.TamperError, match=r"changed builtins\.abs, torch\.allclose"):
        guard.verify()
    assert builtins.abs is original_abs and torch.allclose is original_allclose
    guard.verify()  # put back: nothing left to report


def test_a_method_added_to_tensor_or_a_package_function_replaced_is_caught(guarded):
    torch.Tensor.sub_anything = lambda self, other: self  # added
    original = M.build_attention_mask
    M.build_attention_mask = lambda *a, **k: None  # replaced
    with pytest.raises(guard.TamperError) as err:
        guard.verify()
    assert "torch.Tensor.sub_anything" in str(err.value) and "helpers.nn.model.build_attention_mask" in str(err.value)
    assert not hasattr(torch.Tensor, "sub_anything") and M.build_attention_mask is original


def test_an_honest_cell_changes_nothing_the_guard_watches(guarded):
    namespace = {}
    _as_student(
        "import math, torch\nimport helpers.text.batches\ntorch.manual_seed(0)\nx = math.sqrt(2) * torch.ones(3)\n"
        "def f(t):\n    return abs(t).sum()\ny = f(x)",
        namespace,
    )
    guard.verify()
    assert math.isclose(namespace["y"].item(), 3 * math.sqrt(2), rel_tol=1e-6)


def test_a_static_method_put_out_of_reach_is_still_bound_as_one(monkeypatch):
    from sacrebleu.metrics import BLEU

    monkeypatch.setattr(guard, "REFERENCES", {"9.2": ["sacrebleu.metrics.bleu.BLEU.compute_bleu"]})
    guard.begin("9.2")
    try:
        score = BLEU().compute_bleu([4, 3, 2, 1], [4, 3, 2, 1], 4, 4, smooth_method="exp").score  # via an instance
        assert score == pytest.approx(100.0)
        namespace = {"BLEU": BLEU}
        with pytest.raises(guard.ReferenceOutOfReach):
            _as_student("BLEU.compute_bleu([2, 1, 0, 0], [3, 2, 1, 0], 3, 3)", namespace)
    finally:
        guard.end()
    assert isinstance(BLEU.__dict__["compute_bleu"], staticmethod)


def test_every_listed_reference_exists():
    """A name that moved would guard nothing: each must resolve to something callable."""
    inside = {exercise: names for exercise, (_, names, _) in guard.INSIDE.items()}
    for exercise, names in [*guard.REFERENCES.items(), *inside.items()]:
        for dotted in names:
            owner, attribute = guard._resolve(dotted)
            assert callable(getattr(owner, attribute)), f"{exercise}: {dotted}"


def test_a_library_wrapping_its_own_function_is_not_tampering_a_student_wrapping_it_is():
    """Importing torch._dynamo (an optimiser's first step does) wraps torch.manual_seed: not the student's patch.
    In a fresh process, so that torch._dynamo is not imported yet."""
    import subprocess
    import sys

    script = (
        "import functools, torch\n"
        "from helpers.course import guard\n"
        "guard.begin('9.9')\n"
        "import torch._dynamo\n"
        "assert torch.manual_seed.__wrapped__ is not None\n"
        "guard.verify()\n"
        "seed = torch.manual_seed\n"
        "exec(compile('import functools, torch\\ntorch.manual_seed = functools.wraps(seed)(lambda s: None)', "
        "guard.STUDENT_FILE + ' x>', 'exec'), {'seed': seed})\n"
        "try:\n"
        "    guard.verify()\n"
        "except guard.TamperError as err:\n"
        "    print('caught:', err)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "caught: Exercise 9.9: the solution changed torch.manual_seed" in done.stdout


def test_what_an_exercises_function_may_not_call_raises_inside_it_and_nowhere_else():
    """1.2's stable_softmax may not call torch's softmax, however it is reached (getattr, a helper of the student's),
    and 2.9's count_parameters may not build a module; the student's other code under the exercise may (a comparison
    with torch.softmax, a model built to print its size), and so may the checks."""
    namespace = {}
    guard.begin("1.2")
    try:
        _as_student(
            "import torch\ndef helper(s):\n    return getattr(torch, 'soft' + 'max')(s, -1)\n"
            "def stable_softmax(s):\n    return helper(s)\ncompared = torch.softmax(torch.zeros(2), -1)\n"
            "def by_method(s):\n    return s.softmax(-1)\n",
            namespace,
        )
        with pytest.raises(guard.ReferenceOutOfReach, match="stable_softmax may not call torch.softmax: the exercise"):
            namespace["stable_softmax"](torch.zeros(3))
        assert (
            torch.equal(namespace["compared"], torch.full((2,), 0.5))
            and namespace["by_method"](torch.zeros(2)).sum() == 1
        )
        assert torch.softmax(torch.zeros(2), -1).sum() == 1  # the check's call
    finally:
        guard.end()
    assert namespace["stable_softmax"](torch.zeros(2)).sum() == 1, "after the exercise, torch's own again"
    guard.begin("2.9")
    try:
        _as_student(
            "import torch\nsize = sum(p.numel() for p in torch.nn.Linear(2, 3).parameters())\n"
            "def count_parameters(cfg):\n    return sum(p.numel() for p in torch.nn.Linear(2, 3).parameters())\n",
            namespace,
        )
        with pytest.raises(guard.ReferenceOutOfReach, match="count_parameters may not call torch.nn.Module.__init__"):
            namespace["count_parameters"](None)
        assert namespace["size"] == 9
    finally:
        guard.end()


def test_a_thread_or_a_file_name_beneath_helpers_does_not_take_the_reference_out_of_the_guard(guarded):
    """Two ways a helper earned exercises on 2026-12-07, each in one or two lines of a solution: the reference called
    from a thread of the student's (2.1, 2.9, 5.2: the thread's stack holds no student frame), and from code the
    student compiled under a file name beneath helpers/, or in a package module's namespace (2.1: the guard took it
    for the package). Each raises now. The controls: the package's own code, in a thread or called by the student,
    still reaches the reference (the package's model calls it when a check runs the model for the student)."""
    import concurrent.futures
    import os

    import helpers

    namespace = {}
    _as_student(
        "import concurrent.futures\nfrom helpers.nn.model import sinusoidal_table\n"
        "def pooled(n, d):\n"
        "    return concurrent.futures.ThreadPoolExecutor(1).submit(sinusoidal_table, n, d).result()\n",
        namespace,
    )
    with pytest.raises(guard.ReferenceOutOfReach, match="Exercise 9.1"):
        namespace["pooled"](4, 6)
    fake = os.path.join(os.path.dirname(helpers.__file__), "x.py")
    _as_student(
        "def spoofed(n, d):\n    ns = {'f': sinusoidal_table}\n"
        f"    exec(compile('def g(a, b): return f(a, b)', {fake!r}, 'exec'), ns)\n    return ns['g'](n, d)\n"
        "from helpers.nn import model\n"
        "def in_the_module(n, d):\n"
        "    g = eval(compile('lambda a, b: sinusoidal_table(a, b)', model.__file__, 'eval'), vars(model))\n"
        "    return g(n, d)\n",
        namespace,
    )
    _each_raises(namespace, ("spoofed", "in_the_module"), "Exercise 9.1", 4, 6)
    cfg = M.ModelConfig(vocab_size=10, max_len=8, n_layer=1, n_head=2, d_model=8, positional="sinusoidal")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert pool.submit(M.DecoderOnlyTransformer, cfg).result().pos_table.shape == (8, 8)
    _as_student(
        "from helpers.nn import model\ndef build(cfg):\n    return model.DecoderOnlyTransformer(cfg)", namespace
    )
    assert namespace["build"](cfg).pos_table.shape == (8, 8)


def test_a_function_renamed_or_run_in_a_thread_is_still_the_exercises_function():
    """``stable_softmax = _f`` (a helper's 1.2, 2026-12-07): _f's frame is stable_softmax's, so the softmax it calls
    raises; the control, a student function of another name not bound to stable_softmax, still may call it. And
    2.9's count_parameters building its module in a thread (the thread's stack holds no count_parameters) raises."""
    namespace = {}
    guard.begin("1.2")
    try:
        _as_student(
            "import torch\ndef _f(s):\n    return getattr(torch, 'soft' + 'max')(s, -1)\nstable_softmax = _f\n"
            "def other(s):\n    return torch.softmax(s, -1)\n",
            namespace,
        )
        with pytest.raises(guard.ReferenceOutOfReach, match="stable_softmax may not call torch.softmax"):
            namespace["stable_softmax"](torch.zeros(3))
        assert namespace["other"](torch.zeros(2)).sum() == 1
    finally:
        guard.end()
    guard.begin("2.9")
    try:
        _as_student(
            "import concurrent.futures, torch\ndef count_parameters(cfg):\n"
            "    with concurrent.futures.ThreadPoolExecutor(1) as pool:\n"
            "        return sum(p.numel() for p in pool.submit(torch.nn.Linear, 2, 3).result().parameters())\n",
            namespace,
        )
        with pytest.raises(guard.ReferenceOutOfReach, match="count_parameters may not call torch.nn.Module.__init__"):
            namespace["count_parameters"](None)
    finally:
        guard.end()


def test_a_reference_bound_under_its_name_in_another_package_module_is_out_of_reach_there_too(monkeypatch):
    """helpers.training.sizing imported ``train`` before the guard began: ``sizing.train(...)`` ran the package's
    training loop for 3.3 (a helper, 2026-12-07). Every loaded module's binding of the reference is put out of reach,
    and put back after. The control: the module the reference lives in was the only one poisoned before."""
    from helpers.training import pretrain, sizing
    from helpers.training import train as T

    original = T.train
    assert sizing.train is original and pretrain.train is original
    monkeypatch.setattr(guard, "REFERENCES", {"9.3": ["helpers.training.train.train"]})
    namespace = {}
    guard.begin("9.3")
    try:
        _as_student(
            "from helpers.training import pretrain, sizing\n"
            "def via_sizing():\n    return sizing.train(None, None, None, None, None)\n"
            "def via_pretrain():\n    return pretrain.train(None, None, None, None, None)\n",
            namespace,
        )
        _each_raises(namespace, ("via_sizing", "via_pretrain"), "Exercise 9.3: helpers.training.train.train")
        assert guard._other_bindings(original, T) == [], "all of them poisoned: none holds the original now"
    finally:
        guard.end()
    assert sizing.train is original and pretrain.train is original and T.train is original
    assert (sizing, "train") in guard._other_bindings(original, T), "the control: the binding the guard must find"


def test_a_method_of_a_package_class_or_json_patched_is_put_back_and_named(guarded):
    """The guard noted the package's module-level names only: a check's recorder's method (checks.RecordingScaler.step)
    or json.dumps, with which the probes write their values, could be replaced unseen (a helper's lead, 2026-12-07).
    Both are now watched: put back, and named. The control: an honest cell that reads them changes nothing."""
    step, dumps = checks.RecordingScaler.step, json.dumps
    _as_student("from helpers.course import checks\nseen = checks.RecordingScaler.step\n", {})
    guard.verify()
    _as_student("from helpers.course import checks\nchecks.RecordingScaler.step = lambda self, opt: None\n", {})
    with pytest.raises(guard.TamperError, match=r"helpers\.course\.checks\.RecordingScaler\.step"):
        guard.verify()
    assert checks.RecordingScaler.step is step
    _as_student("import json\njson.dumps = lambda value, **kw: '{}'\n", {})
    with pytest.raises(guard.TamperError, match=r"json\.dumps"):
        guard.verify()
    assert json.dumps is dumps


def test_honest_code_the_new_rules_must_leave_alone(monkeypatch):
    """A newcomer's review of the rules above (2026-12-07) found three honest solutions they failed: a student's own
    decorator on stable_softmax and on another function (the decorator's wrapper, shared by both, was taken for
    stable_softmax), a decorated method of the package (``attention_maps`` under ``torch.no_grad()``) not counted as
    the package's, and the package's code read while an earlier exercise's stand-ins held its names. Each passes now;
    the renamed function of 1.2 still raises under the student's decorator."""
    namespace = {}
    guard.begin("1.2")
    try:
        _as_student(
            "import functools, torch\n"
            "def timed(f):\n    @functools.wraps(f)\n    def wrapper(*a):\n        return f(*a)\n    return wrapper\n"
            "@timed\ndef stable_softmax(s):\n    e = torch.exp(s - s.amax(-1, keepdim=True))\n"
            "    return e / e.sum(-1, keepdim=True)\n"
            "@timed\ndef library_softmax(s):\n    return torch.softmax(s, -1)\n"
            "def _f(s):\n    return torch.softmax(s, -1)\n",
            namespace,
        )
        assert (
            namespace["library_softmax"](torch.zeros(2)).sum() == 1
            and namespace["stable_softmax"](torch.zeros(2)).sum() == 1
        )
        _as_student("stable_softmax = timed(_f)\n", namespace)
        with pytest.raises(guard.ReferenceOutOfReach, match="stable_softmax may not call torch.softmax"):
            namespace["stable_softmax"](torch.zeros(3))
    finally:
        guard.end()
    monkeypatch.setattr(
        guard,
        "REFERENCES",
        {"9.4": ["helpers.nn.model.explicit_attention"], "9.5": ["helpers.nn.model.build_attention_mask"]},
    )
    cfg = M.ModelConfig(vocab_size=10, max_len=8, n_layer=1, n_head=2, d_model=8)
    model, ids = M.DecoderOnlyTransformer(cfg), torch.randint(4, 10, (1, 5))
    q = torch.randn(1, 2, 5, 4)
    _as_student(
        "from helpers.nn import model as M\n"
        "def maps(model, ids):\n    return model.attention_maps(ids)\n"
        "def explicit(q):\n    return M.explicit_attention(q, q, q, None)[0]\n",
        namespace,
    )
    guard.begin("9.4")
    try:
        guard._package_codes(
            "helpers.nn.model"
        )  # read while the stand-in holds explicit_attention's name (stale before)
    finally:
        guard.end()
    guard.begin("9.5")
    try:
        assert len(namespace["maps"](model, ids)) == 1  # the decorated method calls build_attention_mask
        assert namespace["explicit"](q).shape == q.shape  # the package's function calls it too
        with pytest.raises(guard.ReferenceOutOfReach, match="Exercise 9.5"):  # the control: the student's own call
            _as_student("M.build_attention_mask(5)\n", namespace)
    finally:
        guard.end()


def _probe(statement: str, namespace: dict) -> None:
    """``statement`` run as the grader runs a probe (helpers.course.probes.probe_statement)."""
    exec(compile(statement, guard.PROBE_FILE + " test>", "exec"), namespace)


def test_a_probe_that_meets_the_reference_with_no_student_or_package_frame_on_the_way_is_refused(guarded):
    """A one-liner took 2.1 (2026-12-08): ``sinusoidal_positions = helpers.nn.model.sinusoidal_table``. The probe
    calls the name, and no frame of the student's stands between it and the reference; a helper then found a dozen
    more (a partial, a lazy ``map`` the probe unpacks, a package layer returned by ``__new__``, a name rebound by a
    hook after the cell). Under a probe, the package's own frames alone may reach the reference; outside one (a check
    of the notebook's), the reference answers as before."""
    namespace = {}
    _as_student(
        "import functools, itertools, torch\nimport helpers.nn.model as M\n"
        "sinusoidal_positions = M.sinusoidal_table\n"
        "partial = functools.partial(M.sinusoidal_table)\n"
        "exec('def from_a_string(n, d):\\n    return M.sinusoidal_table(n, d)')\n"
        "def lazy(n, d):\n    return itertools.chain.from_iterable(map(M.sinusoidal_table, [n], [d]))\n"
        "class Callable:\n    __call__ = staticmethod(M.sinusoidal_table)\n"
        "instance = Callable()\n"
        "from helpers.course import probes\nrecorded = probes._Recorder(M.sinusoidal_table)\n",
        namespace,
    )
    for name, call in [
        ("sinusoidal_positions", "sinusoidal_positions(4, 6)"),
        ("partial", "partial(4, 6)"),
        ("from_a_string", "from_a_string(4, 6)"),
        ("lazy", "list(lazy(4, 6))"),
        ("instance", "instance(4, 6)"),
        ("the probes' recorder, a package class that calls what it holds", "recorded(4, 6)"),
    ]:
        assert len(eval(call, namespace)) == 4, name  # the control: a check's call, not a probe's, is answered
        with pytest.raises(guard.ReferenceOutOfReach, match="Exercise 9.1"):
            _probe(f"got = {call}", namespace)
    # the package's own frames still reach it under a probe: its model builds its table, for the check or for the
    # student's function (a partial under torch.compile, as an honest student may write it)
    cfg = M.ModelConfig(vocab_size=10, max_len=8, n_layer=1, n_head=2, d_model=8, positional="sinusoidal")
    namespace["cfg"] = cfg
    _probe("model = M.DecoderOnlyTransformer(cfg)", namespace)
    _as_student(
        "@torch.compile(backend='eager')\ndef build(cfg, scale):\n    return M.DecoderOnlyTransformer(cfg)\n"
        "honest_partial = functools.partial(build, scale=2)\n",
        namespace,
    )
    _probe("got = honest_partial(cfg)", namespace)
    assert isinstance(namespace["got"], M.DecoderOnlyTransformer)


def test_under_a_probe_only_the_checks_own_callers_reach_the_reference(guarded, monkeypatch):
    """3.4, 6.1 and 6.3 make a probe's inputs with the exercise's reference, 01's checks compare with it in the
    notebook's feedback (guard.CHECK_CALLERS). Such a function, as its check cell defined it, answers (a comprehension
    inside it too); a function of the same name compiled by the student under the check's file name, one the student
    has compile_check note, and a check function that is not a caller consuming what the student returned, do not."""
    monkeypatch.setattr(guard, "CHECK_CALLERS", {"9.1": ("make_inputs",)})
    namespace = {"M": M}
    check_cell = (
        "def make_inputs(seed):\n    return [M.sinusoidal_table(4, 6) for _ in range(2)]\n"
        "def consume(value):\n    return list(value)\n"
    )
    exec(guard.compile_check(check_cell, "test check"), namespace)
    _probe("got = make_inputs(0)", namespace)
    assert namespace["got"][0].shape == (4, 6)
    _as_student(
        "import itertools\nlazy = itertools.chain.from_iterable(map(M.sinusoidal_table, [4], [6]))\n"
        "forged = {'M': M}\n"
        "exec(compile('def make_inputs(seed):\\n    return M.sinusoidal_table(4, 6)', '<check test check>', 'exec'),"
        " forged)\n"
        "make_inputs = forged['make_inputs']\n",
        namespace,
    )
    with pytest.raises(guard.ReferenceOutOfReach, match="compile_check"):
        _as_student("from helpers.course import guard\nguard.compile_check('x = 1', 'mine')\n", namespace)
    for statement in ["got = consume(lazy)", "got = make_inputs(0)"]:
        with pytest.raises(guard.ReferenceOutOfReach, match="Exercise 9.1"):
            _probe(statement, namespace)

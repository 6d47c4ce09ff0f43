"""Notebook 01 (attention math): its code agrees with helpers.nn.attention, and every check can fail.

The notebook is executed once in-process (quick mode). Each test then calls one of the notebook's
check functions with a plausible mistake and requires AssertionError: a check that cannot fail
proves nothing. Other tests hold the model answers (cells tagged ``answer``) to the measurements and
feed the notebook's wording functions numbers that flip. No value an exercise asks for is saved with the course
(issue 48: the copy bound's saved values gave Exercise 1.4's formula away; its check now measures the worst case).
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
import torch

from helpers import runtime
from helpers.course import exercises, notebooks, written
from helpers.nn.attention import attention, self_attention
from tests.solved import reads_solved, solved

pytestmark = [pytest.mark.notebook, reads_solved("01")]  # every test here reads the solved notebook's run

NB = "01"
ROOT = Path(__file__).resolve().parents[2]
FIGURES = [
    "01_categorical_weights",
    "01_copying_sharpness",
    "01_average_of_two",
    "01_subspace_recovery",
    "01_single_head_stretched_key",
    "01_multi_head_variance",
    "01_kqv_self_attention",
    "01_shuffled_inputs",
    "01_score_scale",
]
# the functions the student writes: none may exist in helpers/ under the same name
STUDENT_FUNCTIONS = [
    "attend",
    "stable_softmax",
    "copying_query",
    "copy_error_bound",
    "averaging_query",
    "beta_needed",
    "recovering_map",
    "single_head_query",
    "two_head_queries",
    "route_projections",
    "score_variance",
    "score_scale",
]
# the points of Questions 1.1 to 1.9 (graded by hand, by their rubrics)
QUESTION_POINTS = [2, 2, 2, 2, 2, 2, 3, 2, 3]
# functions that print a sentence answering a question, and checks that assert what a question asks: they run in
# the solved notebook only (cells tagged answer), and the student copy prints the numbers they are computed from
VERDICT_PRINTERS = [
    "describe_entropy",
    "compare_heads",
    "describe_miss_rate",
    "describe_equivariance",
    "describe_scaling",
]
ANSWER_CHECKS = [
    "check_leak_formula",  # Question 1.4: the leak is |cos theta|
    "check_single_head_averages",  # Question 1.5
    "check_single_head_swings",
    "check_cannot_reach_ub",  # Question 1.7 (i)
    "check_equivariant",  # Question 1.8
    "check_order_sensitive",
]


@pytest.fixture(scope="module")
def ns():
    """The notebook's namespace after running every cell (the checks inside have passed)."""
    return solved("01").namespace  # every exercise passes: full marks


def _solved():
    return notebooks.read_py(notebooks.notebook_sources([NB])[0])


def _check_cells():
    return [c for c in notebooks.code_cells(NB) if "check" in c.tags]


def test_every_item_has_a_check_cell():
    """The checks the student copy keeps (those that state an answer run in the solved notebook only: ANSWER_CHECKS)."""
    sources = "\n".join(c.source for c in _check_cells())
    for name in [
        "check_matches_package",
        "check_categorical",
        "check_stable_softmax",
        "check_copying_query",
        "check_copying_bound",
        "check_averaging_query",
        "check_beta_needed",
        "check_average_of_two",
        "check_recovering_map",
        "check_single_head_query",
        "check_recover",
        "check_averages",
        "check_multi_head",
        "check_construction",
        "check_score_variance_formula",
        "check_unit_variance",
        "check_scaling_keeps_gradients",
    ]:
        assert f"def {name}(" in sources, f"{name} is not defined in a cell tagged check"


def test_exercises_and_points():
    found = [(e.number, e.points) for e in exercises.find_exercises(_solved())]
    assert found == [
        ("1.1", 3),
        ("1.2", 2),
        ("1.3", 2),  # design: the copying query
        ("1.4", 2),
        ("1.5", 2),  # design: the averaging query
        ("1.6", 2),
        ("1.7", 2),  # design: the map that recovers v_a
        ("1.8", 1),  # design: the single head's query from the means
        ("1.9", 1),  # design: the two heads' queries
        ("1.10", 2),
        ("1.11", 3),
    ]
    assert sum(points for _, points in found) >= 12


def test_every_question_has_its_answer_cell_and_a_model_answer():
    nb = _solved()
    questions = exercises.find_questions(nb)
    assert [q.number for q in questions] == [f"1.{i}" for i in range(1, 10)]
    for q in questions:
        assert q.your_answer == q.cell + 1, f"Question {q.number}: the Your answer cell must follow it"
        assert nb.cells[q.your_answer].source.strip() == f"**Your answer.** {exercises.YOUR_ANSWER_PLACEHOLDER}"
        assert nb.cells[q.your_answer + 1].cell_type == "code", f"Question {q.number}: a cell to compute in"
        assert q.answers, f"Question {q.number} has no model answer"
        assert nb.cells[q.answers[0]].source.startswith("**Model answer")


def test_every_question_has_its_points_and_a_rubric_after_its_model_answer():
    nb = _solved()
    questions = exercises.find_questions(nb)
    assert [q.points for q in questions] == QUESTION_POINTS
    assert sum(QUESTION_POINTS) >= 14  # the written share the issue asks of notebook 01
    rubrics = written.rubrics(nb)  # each parses: levels from the question's points down to 0, key phrases
    assert sorted(rubrics) == [q.number for q in questions]
    for q in questions:
        assert q.rubric > q.answers[0], f"Question {q.number}: the rubric comes after its model answer"
        assert len(rubrics[q.number].key_phrases) <= 4
    title = next(c.source for c in nb.cells if c.source.startswith("# 01"))  # the title cell, under the badge cell
    assert f"questions carry **{sum(QUESTION_POINTS)} points**" in " ".join(title.split()), "the title cell's total"
    found = exercises.find_exercises(nb)
    total = f"**{len(found)} exercises, {sum(e.points for e in found)} points**"
    assert total in " ".join(title.split()), "the title cell's count of exercises and points"


# ---------------------------------------------------------------------------------------------
# the student copy asks and never tells: no rubric key phrase, no verdict, no check that states an answer


def _key_phrase_leaks(nb) -> list[str]:
    """Each key phrase of a rubric of solved notebook ``nb`` that its student copy states, with the cell."""
    return written.leaked_key_phrases(nb)


def _plant(nb, text, *, cell_type, after_question="1.5"):
    """A copy of ``nb`` with ``text`` appended to the first non-answer cell of ``cell_type`` after a question."""
    planted = copy.deepcopy(nb)
    start = next(q.cell for q in exercises.find_questions(planted) if q.number == after_question)
    for cell in planted.cells[start + 1 :]:
        if cell.cell_type == cell_type and exercises.ANSWER not in exercises.tags(cell):
            cell.source += text
            return planted
    raise AssertionError(f"no {cell_type} cell after Question {after_question}")


@pytest.mark.parametrize(
    "cell_type, text, expected",
    [
        ("markdown", "\n#\n# Over the draws, $c$ is BIMODAL.", {("1.5", "bimodal")}),
        (  # the check's docstring before the fix, put back into a check cell
            "code",
            '\n\ndef check_swings(c):\n    """Stretched key a: c is large-variance and bimodal, near v_a in many draws."""\n',
            {("1.5", "bimodal"), ("1.5", "near v_a")},
        ),
        (  # the verdict before the fix, printed
            "code",
            '\nprint("Head 1 loses v_a: not rare, but far from the coin flip of one head")\n',
            {("1.6", "not rare"), ("1.5", "coin flip")},
        ),
        (  # the closed-form Jacobian before the fix, in code
            "code",
            "\njac = torch.diag_embed(alpha) - alpha[:, :, None] * alpha[:, None, :]\n",
            {("1.9", "diag_embed(alpha) - alpha")},
        ),
    ],
    ids=["markdown", "docstring", "print", "code"],
)
def test_the_key_phrase_check_finds_a_phrase_planted_in_the_student_copy(cell_type, text, expected):
    nb = _solved()
    assert not _key_phrase_leaks(nb)
    leaks = _key_phrase_leaks(_plant(nb, text, cell_type=cell_type))
    found = {(leak.split(":")[0].removeprefix("Question "), leak.split("'")[1]) for leak in leaks}
    assert found == expected, leaks
    # the same text in an answer cell is no leak: the student copy leaves that cell out
    moved = copy.deepcopy(nb)
    index = next(
        i for i, c in enumerate(nb.cells) if exercises.ANSWER in exercises.tags(c) and c.cell_type == cell_type
    )
    moved.cells[index].source += text
    assert not _key_phrase_leaks(moved)


def test_verdicts_and_the_checks_that_state_answers_run_in_the_solved_notebook_only(ns):
    nb = _solved()
    student = "\n".join(c.source for c in exercises.student_notebook(nb).cells)
    for name in VERDICT_PRINTERS + ANSWER_CHECKS:
        assert name not in student, f"{name} is in the student copy"
        defining = [c for c in nb.cells if f"def {name}(" in c.source]
        assert len(defining) == 1 and exercises.ANSWER in exercises.tags(defining[0]), name
        assert callable(ns[name]), f"{name} did not run in the solved notebook"
    # the student copy prints the numbers the verdicts are computed from
    for numbers in ["mean entropy (nats)", "the gaps run from", "relative error {leak[i]"]:
        assert numbers in student, numbers
    # except the rate Question 1.6 asks the student to estimate: only the solved notebook prints it
    assert "alpha1_a < 1/2 in" not in student and "miss_rate" not in student
    rate_cells = [c for c in nb.cells if "alpha1_a < 1/2 in" in c.source and c.cell_type == "code"]
    assert rate_cells and all(exercises.ANSWER in exercises.tags(c) for c in rate_cells)


def test_the_softmax_jacobian_comes_from_autograd_and_is_the_closed_form(ns):
    """score_stats takes the Jacobian from autograd (the student copy never writes it): it is diag(a) - a a^T."""
    for d, scale in [(4, 1.0), (256, 1.0), (256, 1 / 16)]:
        g = torch.Generator().manual_seed(9 + d)  # score_stats' draws
        q = torch.randn(ns["N_TRIALS"], 1, d, generator=g, dtype=torch.float64)
        K = torch.randn(ns["N_TRIALS"], 16, d, generator=g, dtype=torch.float64)
        alpha = torch.softmax(scale * (q @ K.transpose(-2, -1)).squeeze(1), dim=-1)
        closed = torch.diag_embed(alpha) - alpha[:, :, None] * alpha[:, None, :]
        assert ns["score_stats"](d, scale)[2] == pytest.approx(closed.norm(dim=(-2, -1)).median().item(), rel=1e-9)


# Issue 48: the constructions the assignment asks the student to design, each in the forms it has been written in
# (LaTeX, code, a name or a hint); none may be readable in the student copy, and each must be found in the solved
# notebook (its answer cells or solutions), so that the patterns keep matching what the notebook writes.
DESIGNS = {
    "the copying query s k_j": [r"s\s*\\,\s*k_j", r"\bs\s+k_j\b", r"\bs\s*\*\s*K\[(j|0)\]"],
    "the averaging query beta (k_a + k_b)": [
        r"\\beta\s*\(\s*k_a\s*\+\s*k_b\s*\)",
        r"beta\s*\(\s*k_a\s*\+\s*k_b\s*\)",
        r"K\[(a|0)\]\s*\+\s*K\[(b|1)\]",
    ],
    "the single head beta (mu_a + mu_b)": [
        r"\\beta\s*\(\s*\\mu_a\s*\+\s*\\mu_b\s*\)",
        r"beta\s*\(\s*mu_a\s*\+\s*mu_b\s*\)",
        r"mu\[(a|A_IDX)\]\s*\+\s*mu\[(b|B_IDX)\]",
    ],
    "the projector onto the span": [
        r"AA\^\\top",
        r"QQ\^\\top",
        r"Q\s*@\s*Q\.T",
        r"linalg\.qr",
        r"projection_onto",
        r"projector",
        r"A\(A\^\\top A\)\^\{-1\}",
    ],
}


def test_the_student_copy_holds_none_of_the_designs():
    solved_text = "\n".join(c.source for c in _solved().cells)
    student = "\n".join(c.source for c in exercises.student_notebook(_solved()).cells)
    for design, patterns in DESIGNS.items():
        assert any(re.search(p, solved_text) for p in patterns), f"no pattern of {design} matches the solved notebook"
        for pattern in patterns:
            found = re.search(pattern, student)
            assert not found, f"{design} is readable in the student copy: {found.group(0)!r}"


def test_the_design_patterns_find_what_the_notebook_wrote_before_issue_48():
    """The control: notebook 01 as it was (questions stating q = s k_j, beta (k_a + k_b), beta (mu_a + mu_b) and a QR
    hint above their exercises) fails the test above, for every design."""
    before = (ROOT / "tests" / "notebooks" / "before_issue_48.txt").read_text(encoding="utf-8")
    for design, patterns in DESIGNS.items():
        assert any(re.search(p, before) for p in patterns), f"the patterns of {design} miss the old student copy"


def test_no_derivation_is_left_outside_the_answer_cells():
    """The formulas the exercises ask for appear only in answer cells and in the solutions."""
    visible = "\n".join(
        c.source
        for c in exercises.student_notebook(_solved()).cells  # answers removed, solutions stubbed
    )
    for secret in [
        r"(n-1)e^{-s\Delta}",
        r"\log\!\big((n-2)",
        "AA^\\top",
        r"\beta\mu_a",
        "u_du_a^\\top",
        r"1/\sqrt{d}",
        "s^\\ast",
        "tail event, not",
        r"\Pi\,\mathrm{Attn}(X)",  # Question 1.8's relation: the figure measures it without writing it down
        "Pi Attn(X)",
        "sinusoidal_table",  # Exercise 2.1's table (the package's solution): not shown a notebook early
        "K[1:, 0] = 1 - gap",  # the checks' worst cases (where Question 1.2's bound is reached, Question 1.3's values)
        "V[[a, b]] = 1.0",
        "def worst_copy_case",
        "def worst_average_case",
        "1 + e1 + e2",  # Exercise 1.2's check wrote its expected weights as the shifted softmax (the design it asks)
        "e1 / z3",
        "underflows to exactly 0",
    ]:
        assert secret not in visible, f"{secret!r} is readable in the student copy"


def test_question_1_8s_relation_is_not_measured_in_the_copy_and_the_figure_comes_after_the_question():
    """Attn(X[p]) against Attn(X)[p], each input followed to its new slot, is the relation Question 1.8 asks for: the
    student copy never writes it (the old copies did, before the question and then under it); the figure under the
    question measures the distance to the nearest unshuffled output, in any slot, which assumes no answer."""
    cells = [c.source for c in exercises.student_notebook(_solved()).cells]
    asked = next(i for i, text in enumerate(cells) if "**Question 1.8" in text)
    relation = [i for i, text in enumerate(cells) if re.search(r"attn_fn\(X\)\[p\]|\(X\)\[perm", text)]
    assert not relation, f"cells {relation} follow each input to its new slot: Question 1.8's relation"
    measured = [i for i, text in enumerate(cells) if "torch.cdist(attn_fn(X[p]), attn_fn(X))" in text]
    assert measured, "the figure's measurement is gone: the search has no target"
    assert min(measured) > asked, f"cell {min(measured)} measures the shuffles before Question 1.8 (cell {asked})"


def test_nothing_before_question_1_9_scales_by_its_answer_and_the_summary_states_no_conclusion():
    """Question 1.9 asks by what the scores must be multiplied: no cell before it divides a query by sqrt(d) (the old
    entropy figure did, "scores of order 1 at scale 1"). The closing summary asks where the nine answers show up in
    notebook 02; the old one said (several heads, positional encodings, scaled scores), which is what Questions 1.6,
    1.8 and 1.9 ask."""
    cells = [c.source for c in exercises.student_notebook(_solved()).cells]
    asked = next(i for i, text in enumerate(cells) if "**Question 1.9" in text)
    early = "\n".join(cells[:asked])
    assert "def mean_entropy" in early  # the search has its target
    scaled = re.search(r"/\s*(math|torch|np)\.sqrt\(\s*d\s*\)|rsqrt|order 1 at scale|\\sqrt\{?d|\*\*\s*-?0\.5", early)
    assert not scaled, f"a cell before Question 1.9 writes its factor: {scaled.group(0)!r}"
    summary = next(text for text in cells if "**Next, notebook 02**" in text)
    next_part = summary[summary.index("**Next, notebook 02**") :]
    told = [w for w in ("several heads", "heads side by side", "positional", "scaled scores") if w in next_part]
    assert not told, f"the summary says what notebook 02 brings, answering the questions: {told}"
    printed = next(line for text in cells for line in text.splitlines() if 'print(f"check_categorical passed' in line)
    assert "sum" not in printed and "finite" not in printed, (
        "Question 1.1's check prints the property the question asks to prove (its asserts must state it: that is "
        "what they check; the printed verdict need not)"
    )


def test_student_functions_are_not_in_helpers():
    package = "\n".join(p.read_text() for p in (ROOT / "helpers").glob("*.py"))
    for name in STUDENT_FUNCTIONS:
        assert not re.search(rf"\bdef {name}\(", package), f"helpers/ defines {name}: the solution would be readable"


def test_figures_saved_as_pdf_and_png(ns):
    folder = runtime.figures_dir()
    for name in FIGURES:
        assert (folder / f"{name}.pdf").is_file() and (folder / f"{name}.png").is_file(), f"{name} not saved"


# ---------------------------------------------------------------------------------------------
# defined once: the notebook's attend / self_attend are helpers.nn.attention's


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_notebook_attend_equals_package(ns, dtype):
    g = torch.Generator().manual_seed(123)
    for q_shape, kv in [((16,), ()), ((7, 16), ()), ((3, 7, 16), (3,)), ((2, 3, 7, 16), (3,))]:
        q = 3 * torch.randn(q_shape, generator=g, dtype=dtype)
        K = torch.randn(*kv, 9, 16, generator=g, dtype=dtype)
        V = torch.randn(*kv, 9, 5, generator=g, dtype=dtype)
        c, alpha = ns["attend"](q, K, V)
        c_ref, alpha_ref = attention(q, K, V)
        assert torch.allclose(alpha, alpha_ref, atol=1e-6) and torch.allclose(c, c_ref, atol=1e-6)
        # item 9's scaling: scaling the query is the package's `scale`
        assert torch.allclose(ns["attend"](q / 4, K, V)[0], attention(q, K, V, scale=0.25)[0], atol=1e-6)


def test_notebook_self_attend_equals_package(ns):
    g = torch.Generator().manual_seed(7)
    X = torch.randn(6, 12, generator=g, dtype=torch.float64)
    Wq, Wk, Wv = (torch.randn(12, 4, generator=g, dtype=torch.float64) for _ in range(3))
    for scale in [1.0, 0.5]:
        out, alpha = ns["self_attend"](X, Wq, Wk, Wv, scale=scale)
        out_ref, alpha_ref = self_attention(X, Wq, Wk, Wv, scale=scale)
        assert torch.allclose(out, out_ref, atol=1e-6) and torch.allclose(alpha, alpha_ref, atol=1e-6)


def test_package_check_catches_a_different_attention(ns):
    def unnormalised(q, K, V):  # forgets the softmax: weights are raw exponentials
        alpha = torch.exp(q @ K.transpose(-2, -1))
        return alpha @ V, alpha

    with pytest.raises(AssertionError):
        ns["check_matches_package"](unnormalised)


@pytest.mark.parametrize(
    "source",
    [
        "from helpers.nn.attention import attention\ndef attend(q, K, V):\n    return attention(q, K, V)\n",
        "import helpers.nn.attention as pkg\ndef attend(q, K, V):\n    return pkg.attention(q, K, V)\n",
        "def attend(q, K, V):\n    from helpers.nn.attention import attention as a\n    return a(q, K, V)\n",
        "from helpers.nn.attention import attention as mine\ndef attend(q, K, V):\n    return mine(q, K, V)\n",
    ],
    ids=["by name", "through the module", "imported inside", "renamed"],
)
def test_package_check_refuses_an_attend_that_calls_the_package(ns, source):
    space: dict = {}
    exec(source, space)
    with pytest.raises(AssertionError, match="calls helpers.nn.attention"):  # the probe sees it, the verify says it
        ns["verify_attend"](ns["probe_attend"](space["attend"]))


# ---------------------------------------------------------------------------------------------
# item 1: categorical, and Exercise 1.2's softmax


def _softmax_over(dim):
    def attend(q, K, V):
        alpha = torch.softmax(q @ K.transpose(-2, -1), dim=dim)
        return alpha @ V, alpha

    return attend


def test_categorical_check_fails_on_softmax_over_the_wrong_dim(ns):
    ns["check_categorical"](_softmax_over(-1))  # the right one passes
    with pytest.raises(AssertionError, match="sum to 1"):
        ns["check_categorical"](_softmax_over(-2))  # normalises over the queries


def test_categorical_check_fails_on_the_naive_softmax(ns):
    def naive(q, K, V):
        alpha = ns["naive_softmax"](q @ K.transpose(-2, -1))
        return alpha @ V, alpha

    ns["check_categorical"](naive, scales=[1e-2, 1.0])  # fine at moderate scales
    with pytest.raises(AssertionError, match="NaN"):
        ns["check_categorical"](naive)


def test_categorical_check_cell_fails_with_a_buggy_attend_swapped_in(ns):
    """The pattern of the brief: swap the notebook's function, re-run its check cell."""
    cell = next(c for c in _check_cells() if "def check_categorical" in c.source)
    patched = dict(ns)
    patched["attend"] = _softmax_over(-2)
    with pytest.raises(AssertionError):
        exec(compile(cell.source, "<notebook 01 check cell>", "exec"), patched)


def test_notebook_stable_softmax_is_torch_softmax_even_with_masked_and_huge_scores(ns):
    g = torch.Generator().manual_seed(5)
    scores = 300 * torch.randn(4, 6, 9, generator=g, dtype=torch.float64)
    scores[..., :3] = float("-inf")  # masked keys, as notebook 02's mask makes them
    scores[0, 0] += 5000.0
    torch.testing.assert_close(ns["stable_softmax"](scores), torch.softmax(scores, dim=-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "name, wrong, message",
    [
        ("the textbook formula", lambda s: torch.exp(s) / torch.exp(s).sum(-1, keepdim=True), "NaN"),
        ("one max for the whole batch", lambda s: torch.exp(s - s.max()) / torch.exp(s - s.max()).sum(-1, True), "NaN"),
        (
            "the smallest score subtracted",
            lambda s: torch.exp(s - s.amin(-1, True)) / torch.exp(s - s.amin(-1, True)).sum(-1, True),
            "NaN",
        ),
        (
            "normalised over the first axis",
            lambda s: torch.exp(s - s.amax(0, True)) / torch.exp(s - s.amax(0, True)).sum(0, True),
            "the exact ones",
        ),
        ("torch.softmax called", lambda s: torch.softmax(s, dim=-1), "calls"),
        ("logsumexp called", lambda s: torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)), "calls"),
    ],
)
def test_stable_softmax_check_fails_on_plausible_mistakes(ns, name, wrong, message):
    check = lambda fn: ns["verify_stable_softmax"](ns["probe_stable_softmax"](fn))  # noqa: E731  (the check cell's call)
    check(ns["stable_softmax"])
    with pytest.raises(AssertionError, match=message):
        check(wrong)


def test_describe_entropy_flips_with_the_numbers(ns):
    describe = ns["describe_entropy"]
    falling = describe([2.0, 1.0, 0.01], n=8)
    assert "falls" in falling and "stays inside" in falling
    rising = describe([0.5, 1.0, 3.0], n=8)  # log 8 = 2.08: 3.0 is out of range
    assert "does not fall" in rising and "LEAVES" in rising


# ---------------------------------------------------------------------------------------------
# item 2: copying, and Exercise 1.3's two-sided check

COPY_BOUND_CASES = [  # (n, gap, spread, s): clipped at 1 (s small), moderate, and far into the exponential tail
    (16, 0.5, 1.0, 0.0),
    (16, 0.5, 2.0, 4.0),
    (16, 0.5, 2.0, 12.0),
    (8, 0.2, 0.5, 60.0),
    (64, 1.0, 3.0, 20.0),
    (4, 1.5, 1.0, 8.0),
    (2, 2.0, 0.25, 5.0),
]


def copy_bound_by_hand(n, gap, spread, s):
    """The model answer of Question 1.2: min(1, (n - 1) e^{-s gap}) * spread."""
    return min(1.0, (n - 1) * math.exp(-s * gap)) * spread


def test_the_copy_cases_are_the_notebooks_and_the_model_bound_sits_within_1_5x_of_the_worst_error(ns):
    """The check accepts up to 2x the largest error of the worst case: the derived bound uses at most 1.5x of that
    on these cases, so a bound that is right passes with room, and a 3x-too-loose one cannot."""
    assert ns["COPY_CASES"] == COPY_BOUND_CASES
    for n, gap, spread, s in COPY_BOUND_CASES:
        x = (n - 1) * math.exp(-s * gap)
        assert copy_bound_by_hand(n, gap, spread, s) <= 1.5 * x / (1 + x) * spread


def test_notebook_copy_bound_is_the_model_answer(ns):
    for n, gap, spread, s in COPY_BOUND_CASES:
        assert ns["copy_error_bound"](n, gap, spread, s) == pytest.approx(copy_bound_by_hand(n, gap, spread, s))


def _axis(K, j, s):
    q = torch.zeros(K.shape[1], dtype=K.dtype)
    q[j] = s
    return q


@pytest.mark.parametrize(
    "name, wrong, message",
    [
        ("another key", lambda K, j, s: s * K[(j + 1) % len(K)], "not a copy"),
        ("pointing away", lambda K, j, s: -s * K[j], "not a copy"),
        ("a fixed small norm", lambda K, j, s: 2.0 * K[j], "not a copy"),
        ("the j-th axis", _axis, "not a copy"),
        ("every key at once", lambda K, j, s: s * K.sum(0) / K.sum(0).norm(), "not a copy"),
        ("the right direction at twice the norm", lambda K, j, s: 2 * s * K[j], "not s = 200"),
        ("a row, not a vector", lambda K, j, s: s * K[j : j + 1], "shape"),
    ],
)
def test_copying_query_check_fails_on_wrong_designs(ns, name, wrong, message):
    """Checked by what attention does with the query on keys it draws: a design that does not copy fails."""
    ns["check_copying_query"](lambda K, j, s: s * K[j])
    with pytest.raises(AssertionError, match=message):
        ns["check_copying_query"](wrong)


def test_copying_query_check_accepts_another_design_that_copies(ns):
    """The check asks what the query does, not what it is: another direction that still gives key j the top score by
    a margin (k_j with a little of the keys' mean taken away) passes too."""

    def other(K, j, s):
        q = K[j] - 0.3 * K.mean(0)
        return s * q / q.norm()

    ns["check_copying_query"](other)


@pytest.mark.parametrize(
    "name, wrong, message",
    [
        ("no bound at all", lambda n, gap, spread, s: float("inf"), "too loosely"),
        ("the spread itself", lambda n, gap, spread, s: spread, "too loosely"),
        ("ten times too loose", lambda n, gap, spread, s: 10 * copy_bound_by_hand(n, gap, spread, s), "too loosely"),
        ("three times too loose", lambda n, gap, spread, s: 3 * copy_bound_by_hand(n, gap, spread, s), "too loosely"),
        ("the gap left out", lambda n, gap, spread, s: min(1.0, (n - 1) * math.exp(-s)) * spread, "does not hold"),
        ("the n - 1 left out", lambda n, gap, spread, s: min(1.0, math.exp(-s * gap)) * spread, "does not hold"),
        ("the spread left out", lambda n, gap, spread, s: min(1.0, (n - 1) * math.exp(-s * gap)), "does not hold"),
        ("zero", lambda n, gap, spread, s: 0.0, "does not hold"),
    ],
)
def test_copying_bound_check_is_two_sided(ns, name, wrong, message):
    with pytest.raises(AssertionError, match=message):
        ns["check_copying_bound"](wrong)


def test_copying_bound_check_accepts_a_tighter_valid_bound(ns):
    """1 - alpha_j itself in the worst case, x / (1 + x) * spread, is a valid and tighter bound: it passes."""

    def tighter(n, gap, spread, s):
        x = (n - 1) * math.exp(-s * gap)
        return x / (1 + x) * spread

    ns["check_copying_bound"](tighter)
    ns["check_copying_bound"](lambda n, gap, spread, s: 1.3 * copy_bound_by_hand(n, gap, spread, s))


def test_the_worst_copy_case_is_the_worst(ns):
    """No random keys and values with the same n, gap and spread beat the check's worst case: its lower side is fair."""
    attend, worst_case = ns["attend"], ns["check_inputs"].worst_copy_case
    g = torch.Generator().manual_seed(11)
    for n, d in [(4, 3), (16, 16), (32, 8)]:
        for _ in range(5):
            K = torch.randn(n, d, generator=g, dtype=torch.float64)
            K = K / K.norm(dim=-1, keepdim=True)
            V = torch.randn(n, 2, generator=g, dtype=torch.float64)
            gap = (1 - K[1:] @ K[0]).min().item()
            spread = (V - V[0]).norm(dim=-1).max().item()
            Kw, Vw = worst_case(n, gap, spread)
            assert torch.allclose(Kw.norm(dim=-1), torch.ones(n, dtype=torch.float64))
            assert (1 - Kw[1:] @ Kw[0]).min().item() == pytest.approx(gap)
            for s in [0.0, 2.0, 10.0, 40.0]:
                err = (attend(s * K[0], K, V)[0] - V[0]).norm().item()
                worst = (attend(s * Kw[0], Kw, Vw)[0] - Vw[0]).norm().item()
                assert err <= worst * (1 + 1e-9) + 1e-300
                assert worst <= copy_bound_by_hand(n, gap, spread, s) * (1 + 1e-9)


def test_sweep_check_fails_on_a_too_optimistic_bound(ns):
    sweep = ns["copy"].clone()
    sweep[:, 2] = sweep[:, 2] * 1e-3  # a bound 1000x too optimistic
    with pytest.raises(AssertionError, match="exceeds the bound"):
        ns["check_sweep_under_bound"](sweep)


# ---------------------------------------------------------------------------------------------
# item 3: average of two, and Exercise 1.4


def beta_by_hand(n, tau):
    return math.log((n - 2) * (1 / tau - 0.5))


def test_notebook_beta_is_the_model_answer(ns):
    for n in (3, 10, 500):
        for tau in (0.3, 1e-4):
            assert ns["beta_needed"](n, tau) == pytest.approx(beta_by_hand(n, tau), rel=1e-12)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda n, tau: beta_by_hand(n, tau) - 0.01, "too small"),
        (lambda n, tau: beta_by_hand(n, tau) + 0.01, "smaller beta would do"),
        (lambda n, tau: math.log((n - 2) / tau), "smaller beta would do"),  # the looser e^{-beta} bound
        (lambda n, tau: math.log(n * (1 / tau - 0.5)), "smaller beta would do"),
        (lambda n, tau: math.log((n - 2) * (1 / tau - 1)), "too small"),
    ],
)
def test_beta_needed_check_is_two_sided(ns, wrong, message):
    with pytest.raises(AssertionError, match=message):
        ns["check_beta_needed"](wrong)


@pytest.mark.parametrize(
    "name, wrong, message",
    [
        ("one key only", lambda K, a, b, beta: beta * K[a], "alike"),
        ("a difference of keys", lambda K, a, b, beta: beta * (K[a] - K[b]), "alike"),
        ("no scale", lambda K, a, b, beta: K[a] + K[b], "not their average"),
        ("b weighted twice", lambda K, a, b, beta: beta * (K[a] + 2 * K[b]), "alike"),
        ("every key at once", lambda K, a, b, beta: beta * K.sum(0), "not their average"),
        ("half the score asked for", lambda K, a, b, beta: beta * (K[a] + K[b]) / 2, "not their average"),
        ("the right query at twice the score", lambda K, a, b, beta: 2 * beta * (K[a] + K[b]), "not 40"),
    ],
)
def test_averaging_query_check_fails_on_wrong_designs(ns, name, wrong, message):
    """Checked by what attention does with the query on orthonormal keys it draws."""
    ns["check_averaging_query"](lambda K, a, b, beta: beta * (K[a] + K[b]))
    with pytest.raises(AssertionError, match=message):
        ns["check_averaging_query"](wrong)


def test_averaging_query_check_accepts_another_design_that_averages(ns):
    """Not a formula compared: a query that also pushes every other key's score below zero averages too, and passes."""

    def other(K, a, b, beta):
        rest = [i for i in range(len(K)) if i not in (a, b)]
        return beta * (K[a] + K[b]) - K[rest].sum(0)

    ns["check_averaging_query"](other)


def test_average_of_two_fails_when_beta_is_too_small(ns):
    ns["check_average_of_two"](beta=12.0, n=64)
    with pytest.raises(AssertionError, match="not within"):
        ns["check_average_of_two"](beta=3.0, n=64)
    # the required beta grows like log n: enough for 8 keys, not for 1024
    ns["check_average_of_two"](beta=9.0, n=8)
    with pytest.raises(AssertionError):
        ns["check_average_of_two"](beta=9.0, n=1024)


def test_model_answer_of_question_1_3_matches_the_measurement(ns):
    """alpha_a = e^beta / (2 e^beta + n - 2); c - m = eps (mean of the other values - m); |c - m| <= 2 eps max|v|."""
    for beta, n in [(0.0, 5), (2.5, 30), (10.0, 200)]:
        K, V = ns["orthonormal_setup"](n, 4, torch.Generator().manual_seed(1))
        err, alpha = ns["average_error"](beta, K, V)
        assert alpha[0].item() == pytest.approx(math.exp(beta) / (2 * math.exp(beta) + n - 2), rel=1e-12)
        eps = (n - 2) / (2 * math.exp(beta) + n - 2)
        m = (V[0] + V[1]) / 2
        exact = eps * (V[2:].mean(0) - m).norm().item()
        assert err == pytest.approx(exact, rel=1e-9, abs=1e-14)
        assert err <= 2 * eps * V.norm(dim=-1).max().item()
        K_w, V_w = ns["check_inputs"].worst_average_case(n)
        assert ns["average_error"](beta, K_w, V_w)[0] == pytest.approx(2 * eps, rel=1e-9)  # the bound is reached


# ---------------------------------------------------------------------------------------------
# item 4: the projection, Exercise 1.5


def test_notebook_recovering_map_is_the_orthogonal_projector(ns):
    g = torch.Generator().manual_seed(3)
    A = torch.randn(7, 3, generator=g, dtype=torch.float64)  # not orthonormal
    expected = A @ torch.linalg.solve(A.T @ A, A.T)
    torch.testing.assert_close(ns["recovering_map"](A), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "name, wrong, message",
    [
        ("A A^T without orthonormalising", lambda A: A @ A.T, "not orthonormal: .*reaches"),
        ("A^T A", lambda A: A.T @ A, "shape"),
        ("the identity", lambda A: torch.eye(A.shape[0], dtype=A.dtype), "an orthonormal basis: .*reaches"),
        ("onto the complement", lambda A: torch.eye(A.shape[0], dtype=A.dtype) - A @ A.T, "reaches"),
        ("QR of the transpose", lambda A: (lambda Q: Q @ Q.T)(torch.linalg.qr(A.T, mode="complete")[0]), "shape"),
    ],
)
def test_recovering_map_check_fails_on_wrong_maps(ns, name, wrong, message):
    with pytest.raises(AssertionError, match=message):
        ns["check_recovering_map"](wrong)


def test_recovering_map_check_accepts_another_construction_of_the_projector(ns):
    """A(A^T A)^-1 A^T is the same map built another way: the check asks what M does, so it passes."""
    ns["check_recovering_map"](lambda A: A @ torch.linalg.solve(A.T @ A, A.T))


def test_recover_check_fails_when_subspaces_are_not_orthogonal(ns):
    ns["check_recover"](ns["basis_A"], ns["W4"])
    with pytest.raises(AssertionError, match="orthogonal"):
        ns["check_recover"](ns["basis_A"], ns["tilted_basis"](math.pi / 4))
    with pytest.raises(AssertionError):
        ns["check_recover"](ns["basis_A"], ns["tilted_basis"](math.pi / 2 - 0.01))  # barely tilted still leaks


def test_leak_formula_check_fails_on_a_wrong_subspace(ns):
    tilted = ns["tilted_basis"]
    ns["check_leak_formula"](math.pi / 3)
    ns["tilted_basis"] = lambda theta: tilted(theta / 2)  # the subspace is not at the angle we claim
    try:
        with pytest.raises(AssertionError, match="cos theta"):
            ns["check_leak_formula"](math.pi / 3)
    finally:
        ns["tilted_basis"] = tilted


# ---------------------------------------------------------------------------------------------
# items 5 and 6: single head vs two heads, Exercise 1.6


@pytest.mark.parametrize(
    "name, wrong, message",
    [
        ("one mean only", lambda mu, a, b, beta: beta * mu[a], "away from"),
        ("a difference of means", lambda mu, a, b, beta: beta * (mu[a] - mu[b]), "away from"),
        ("no scale", lambda mu, a, b, beta: mu[a] + mu[b], "away from"),
        ("every mean at once", lambda mu, a, b, beta: beta * mu.sum(0), "away from"),
        ("the right query at twice the score", lambda mu, a, b, beta: 2 * beta * (mu[a] + mu[b]), "not 10"),
    ],
)
def test_single_head_query_check_fails_on_wrong_designs(ns, name, wrong, message):
    ns["check_single_head_query"](lambda mu, a, b, beta: beta * (mu[a] + mu[b]))
    with pytest.raises(AssertionError, match=message):
        ns["check_single_head_query"](wrong)


def test_single_head_checks_tell_the_two_key_distributions_apart(ns):
    with pytest.raises(AssertionError, match="does not swing"):
        ns["check_single_head_swings"](ns["c_iso"])  # isotropic keys do not swing
    with pytest.raises(AssertionError):
        ns["check_single_head_averages"](ns["c_single"])  # stretched keys do not average


def test_multi_head_check_fails_if_both_heads_use_the_same_query(ns):
    beta, mu, a, b = ns["BETA"], ns["mu"], ns["A_IDX"], ns["B_IDX"]
    q_single = beta * (mu[a] + mu[b])
    with pytest.raises(AssertionError, match="smaller"):
        ns["check_multi_head"](ns["keys_stretch"], q_single, q_single)
    with pytest.raises(AssertionError):
        ns["check_multi_head"](ns["keys_stretch"], beta * mu[a], beta * mu[a])  # both heads on a: not even the average


@pytest.mark.parametrize(
    "name, wrong",
    [
        ("both heads on a", lambda mu, a, b, beta: (beta * mu[a], beta * mu[a])),
        ("no scale", lambda mu, a, b, beta: (mu[a], mu[b])),
        ("head 2 pointed away from b", lambda mu, a, b, beta: (beta * mu[a], -beta * mu[b])),
        ("the single head's query twice", lambda mu, a, b, beta: (beta * (mu[a] + mu[b]),) * 2),
    ],
)
def test_two_head_queries_checks_fail_on_wrong_queries(ns, name, wrong):
    q1, q2 = wrong(ns["mu"], ns["A_IDX"], ns["B_IDX"], ns["BETA"])
    with pytest.raises(AssertionError):
        ns["check_averages"](ns["two_heads"](ns["keys_iso"], q1, q2)[0])
        ns["check_multi_head"](ns["keys_stretch"], q1, q2)


def test_model_answer_miss_probability_matches_the_measurement(ns):
    """Phi((log(n-1)/beta - 1) / sqrt(1/2)) against the measured miss rate, within 4 standard errors."""
    n, beta, draws = ns["N_KEYS"], ns["BETA"], ns["N_MC"]
    predicted = 0.5 * (1 + math.erf((math.log(n - 1) / beta - 1) / math.sqrt(0.5) / math.sqrt(2)))
    measured = (ns["alpha1"][:, ns["A_IDX"]] < 0.5).double().mean().item()
    assert predicted == pytest.approx(0.127, abs=0.001)  # the number quoted in the model answer
    assert abs(measured - predicted) < 4 * math.sqrt(predicted * (1 - predicted) / draws)


def test_the_numbers_quoted_in_the_model_answers_hold_in_this_run(ns):
    """Question 1.5: tr Cov(c) about 0.4 at beta = 10; 1.6: two heads cut it more than 10x; 1.3: beta >= 11.03."""
    single, multi = ns["total_variance"](ns["c_single"]), ns["total_variance"](ns["c_multi"])
    assert single == pytest.approx(0.4, abs=0.05)
    assert single / multi > 10
    assert ns["beta_needed"](64, 1e-3) == pytest.approx(11.03, abs=0.005)


def test_describe_miss_rate_flips_with_the_rate(ns):
    describe = ns["describe_miss_rate"]
    assert "a tail event" in describe(0.02, 20_000)
    middle = describe(0.129, 2_000)
    assert "not rare" in middle and "tail event" not in middle and "12.9%" in middle
    assert "coin flip: the two heads do not help" in describe(0.5, 2_000)


def test_compare_heads_flips_when_two_heads_do_not_help(ns):
    compare = ns["compare_heads"]
    assert "cut tr Cov(c) from 0.400 to 0.020, 20x smaller" in compare(0.4, 0.02)
    assert "do NOT reduce" in compare(0.02, 0.4)
    assert "smaller" in compare(0.4, 0.0)  # no division by zero when two heads leave no variance at all


# ---------------------------------------------------------------------------------------------
# item 7: key/query/value projections, Exercise 1.7


def test_construction_check_fails_without_projections(ns):
    eye = ns["I8"]
    with pytest.raises(AssertionError, match="away from u_b"):
        ns["check_construction"](eye, eye, eye)
    with pytest.raises(AssertionError):  # queries routed the wrong way round
        ns["check_construction"](ns["Q7"].T, ns["K7"], ns["V7"])


def test_construction_check_fails_on_values_that_keep_u_c(ns):
    u_b, u_c, beta = ns["u_b"], ns["u_c"], ns["BETA7"]
    V_keep = (torch.outer(u_b, u_b) + torch.outer(u_c, u_c)) / beta**2
    with pytest.raises(AssertionError, match="c1 is"):
        ns["check_construction"](ns["Q7"], ns["K7"], V_keep)


def test_cannot_reach_check_fails_when_something_does_reach_u_b(ns):
    X7, Q7, K7, V7 = ns["X7"], ns["Q7"], ns["K7"], ns["V7"]

    def c2_projected(x2):
        X = torch.stack([X7[0], x2, X7[2]])
        return ns["self_attend"](X, Q7.T, K7.T, V7.T)[0][1]

    with pytest.raises(AssertionError, match="within"):
        ns["check_cannot_reach_ub"](c2_projected, {"x2 = u_a": ns["u_a"]})


# ---------------------------------------------------------------------------------------------
# item 8: permutation equivariance


def test_equivariance_checks_detect_positions(ns):
    with pytest.raises(AssertionError, match="not permutation equivariant"):
        ns["check_equivariant"](ns["attn_with_positions"])
    with pytest.raises(AssertionError, match="ignores order"):
        ns["check_order_sensitive"](ns["attn_plain"])


def test_equivariance_check_catches_a_position_dependent_bug(ns):
    """A mask (here causal) also ties outputs to slots, so it breaks equivariance too."""
    Wq, Wk, Wv, T = ns["Wq8"], ns["Wk8"], ns["Wv8"], ns["T8"]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    with pytest.raises(AssertionError):
        ns["check_equivariant"](lambda X: self_attention(X, Wq, Wk, Wv, mask=causal)[0])


def test_describe_equivariance_flips_with_the_gaps(ns):
    describe = ns["describe_equivariance"]
    as_measured = describe([1e-16, 3e-16], [0.2, 0.5])
    assert "at rounding level" in as_measured and "every shuffle makes new outputs" in as_measured
    flipped = describe([1e-3, 3e-16], [1e-17, 0.5])
    assert "above rounding level" in flipped and "some shuffle still only rearranges" in flipped


# ---------------------------------------------------------------------------------------------
# item 9: sqrt(d_k), Exercise 1.8


def test_scaling_check_fails_if_scaling_is_removed(ns):
    with pytest.raises(AssertionError, match="top weight|Jacobian norm"):
        ns["check_scaling_keeps_gradients"](lambda d: 1.0)


@pytest.mark.parametrize(
    "name, wrong",
    [
        ("the standard deviation", lambda d, vq, vk: math.sqrt(d * vq * vk)),
        ("var_k forgotten", lambda d, vq, vk: d * vq),
        ("variances added", lambda d, vq, vk: d * (vq + vk)),
        ("d forgotten", lambda d, vq, vk: vq * vk),
    ],
)
def test_variance_formula_check_fails_on_wrong_formulas(ns, name, wrong):
    with pytest.raises(AssertionError, match="random draws give"):
        ns["check_score_variance_formula"](wrong)


@pytest.mark.parametrize(
    "name, wrong",
    [
        ("variances ignored", lambda d, vq, vk: 1 / math.sqrt(d)),
        ("divided by the variance", lambda d, vq, vk: 1 / (d * vq * vk)),
        ("not scaled", lambda d, vq, vk: 1.0),
    ],
)
def test_unit_variance_check_fails_on_wrong_factors(ns, name, wrong):
    with pytest.raises(AssertionError, match="expected 1"):
        ns["check_unit_variance"](wrong)


def test_describe_scaling_flips_with_the_numbers(ns):
    describe = ns["describe_scaling"]
    dims = [2, 1024]
    as_measured = describe(dims, [(2.0, 0.5, 0.6), (1000.0, 1.0, 1e-6)], [(1.0, 0.3, 0.5), (1.0, 0.3, 0.5)])
    unscaled, scaled = as_measured.splitlines()
    assert "falls by 5.8 orders of magnitude" in unscaled and "stays within a factor 1.0" in scaled
    flipped = describe(dims, [(2.0, 0.5, 0.6), (1000.0, 0.5, 0.5)], [(1.0, 0.3, 0.5), (1.0, 0.9, 1e-4)])
    unscaled, scaled = flipped.splitlines()
    assert "stays within" in unscaled and "falls by" in scaled

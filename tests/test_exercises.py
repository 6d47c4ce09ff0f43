"""Exercises: the markup, the student copy, the grader, and a catalogue of wrong answers each exercise must catch.

The catalogue is the point: for every coding exercise, at least three plausible wrong implementations are
written into the notebook's source in place of the solution, and grading must fail that exercise, and no
other. (The solved notebooks' full marks are asserted where the notebook tests run them: exercises.run_solved.)
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import nbformat
import pytest

from helpers import cli, exercises, notebooks
from helpers.exercises import BEGIN, END, ExerciseMarkupError

ROOT = Path(__file__).resolve().parents[1]
SOURCES = notebooks.notebook_sources()
IDS = [p.stem[:2] for p in SOURCES]


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    for kind, source, *tags in cells:
        cell = nbformat.v4.new_markdown_cell(source) if kind == "md" else nbformat.v4.new_code_cell(source)
        if tags:
            cell.metadata["tags"] = tags[0]
        nb.cells.append(cell)
    return nb


SOLVED = f"def f(x):\n    '''Twice x.'''\n    {BEGIN}\n    y = 2 * x\n    return y\n    {END}\n"


# ---------------------------------------------------------------------------------------------
# markup


def test_exercise_headings_number_title_points_and_own_cells_until_the_next_heading():
    nb = _nb(
        ("md", "# Title"),
        ("code", "x = 1"),
        ("md", "## Exercise 9.1 · Doubling (4 points)"),
        ("code", SOLVED),
        ("code", "assert f(2) == 4", ["check"]),
        ("md", "## 3. Something · Exercise 9.2 (1 point)"),
        ("code", "z = 3  # SOLUTION"),
        ("code", "assert z == 3", ["check"]),
        ("md", "## Not an exercise"),
        ("code", "print(z)"),
    )
    found = exercises.find_exercises(nb)
    assert [(e.number, e.title, e.points, e.cells) for e in found] == [
        ("9.1", "Doubling", 4, [3, 4]),
        ("9.2", "3. Something", 1, [6, 7]),
    ]


@pytest.mark.parametrize(
    "cells, message",
    [
        ((("code", SOLVED),), "no exercise heading"),
        (
            (("md", "## Exercise 1.1 · A (1 point)"), ("code", "x = 1"), ("code", "assert x", ["check"])),
            "nothing to write",
        ),
        ((("md", "## Exercise 1.1 · A (1 point)"), ("code", SOLVED)), "no cell tagged 'check'"),
        (
            (
                ("md", "## Exercise 1.1 · A (1 point)"),
                ("code", SOLVED, ["check"]),
                ("md", "## Exercise 1.1 · B (1 point)"),
                ("code", SOLVED, ["check"]),
            ),
            "appears twice",
        ),
        ((("md", "## Exercise 1.1 · A (1 point)"), ("code", f"{BEGIN}\nx = 1", ["check"])), "never closed"),
        ((("md", "## Exercise 1.1 · A (1 point)"), ("code", f"x = 1\n{END}", ["check"])), "without a"),
    ],
)
def test_inconsistent_markup_is_refused_with_what_to_fix(cells, message):
    with pytest.raises(ExerciseMarkupError, match=message):
        exercises.find_exercises(_nb(*cells))


def test_strip_solutions_keeps_signature_docstring_and_indentation_and_names_the_exercise():
    ex = exercises.Exercise("9.1", "Doubling", 4, 0)
    out = exercises.strip_solutions(SOLVED + "z = g(1)  # SOLUTION\n# a comment ending in # SOLUTION\n", ex)
    assert out.splitlines() == [
        "def f(x):",
        "    '''Twice x.'''",
        "    raise NotImplementedError('Exercise 9.1: Doubling. Replace this line with your code.')",
        "raise NotImplementedError('Exercise 9.1: Doubling. Replace this line with your code.')",
        "# a comment ending in # SOLUTION",
    ]
    ast.parse(out)


def test_every_notebook_has_exercises_with_points_and_every_solution_under_one():
    numbers = []
    for py in SOURCES:
        found = exercises.find_exercises(notebooks._read_py(py))
        assert found, f"{py.name} has no exercises"
        assert all(e.number.split(".")[0] == str(int(py.stem[:2])) for e in found), f"{py.name}: numbered N.M"
        numbers += [e.number for e in found]
    assert len(numbers) == len(set(numbers))


# ---------------------------------------------------------------------------------------------
# the student copy


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    assert cli.main(["student", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_student_copy_has_no_solution_line_and_every_cell_parses(student, py):
    solved = notebooks._read_py(py)
    solution = {
        line.strip()
        for c in solved.cells
        if c.cell_type == "code"
        for line in exercises.solution_lines(c.source)
        if len(line.strip()) > 12
    }
    dummy = exercises.Exercise("0.0", "", 0, 0)
    elsewhere = {  # lines that also occur outside the solutions (a loop header, say) may stay
        line.strip() for c in solved.cells for line in exercises.strip_solutions(c.source, dummy).splitlines()
    }
    copy = nbformat.read(student / py.with_suffix(".ipynb").name, as_version=4)
    text = "\n".join(c.source for c in copy.cells)
    for marker in (BEGIN, END):
        assert marker not in text
    leaked = [line for line in text.splitlines() if line.strip() in solution and line.strip() not in elsewhere]
    assert not leaked, f"solution lines in the student copy of {py.name}: {leaked[:3]}"
    for cell in copy.cells:
        if cell.cell_type == "code":
            ast.parse(cell.source)  # every cell still parses
            assert not cell.outputs
    found = exercises.find_exercises(copy, solved=False)
    stubs = text.count("raise NotImplementedError('Exercise ")
    assert stubs >= len(found), "each exercise keeps at least one stub"
    for cell in solved.cells:
        if "check" in cell.metadata.get("tags", []):
            assert cell.source in text, "every check stays in the student copy, word for word"
    assert (student / py.name).exists(), "the .py pair is written too"


def test_running_a_student_copy_stops_at_its_first_stub_with_that_exercises_message(student, tmp_path):
    with pytest.raises(notebooks.NotebookFailed) as err:
        notebooks.run_notebook(student / "02_transformer_from_scratch.ipynb", tmp_path)
    assert "NotImplementedError" in str(err.value)
    assert "Exercise 2.1: Positional encoding" in str(err.value)


@pytest.mark.parametrize("py", SOURCES, ids=IDS)
def test_grading_a_student_copy_gives_zero_without_crashing(student, py):
    result = exercises.grade(student / py.with_suffix(".ipynb").name)  # in a kernel, as instructors run it
    assert result.possible > 0 and result.total == 0
    first = result.results[0]
    assert (first.status, first.message) == ("not attempted", "the stub is still in place")
    assert all(r.status == "not attempted" for r in result.results)
    assert result.stopped == f"Exercise {first.number} is not written yet"


def test_grade_command_with_hidden_checks_reports_each_exercise_and_writes_json(student, tmp_path, capsys):
    """Hidden checks run at the end of their exercise: one that fails on the solution fails that exercise only."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "02_extra.py").write_text(
        "# hidden checks for notebook 02\n"
        "# %% Exercise 2.1\n"
        "assert sinusoidal_positions(3, 4).shape == (3, 4)\n"
        "# %% Exercise 2.2\n"
        "assert False, 'a hidden check the solution fails'\n"
    )
    out = tmp_path / "grade.json"
    args = ["grade", str(ROOT / "notebooks" / "02_transformer_from_scratch.py"), "--hidden", str(hidden)]
    assert cli.main([*args, "--json", str(out), "--in-process"]) == 0
    result = json.loads(out.read_text())
    status = {e["number"]: (e["status"], e["message"]) for e in result["exercises"]}
    assert status["2.1"] == ("passed", "")
    assert status["2.2"] == ("failed", "AssertionError: a hidden check the solution fails")
    assert all(s == "not attempted" for n, (s, _) in status.items() if n not in ("2.1", "2.2"))
    assert result["total"] == 2 and result["possible"] == 25
    printed = capsys.readouterr().out
    assert "Exercise 2.1: passed (2 points)" in printed and "Total: 2/25 points" in printed
    assert not list(student.rglob("02_extra.py")), "the student build never contains hidden checks"


def test_hidden_checks_outside_an_exercise_or_naming_an_unknown_one_are_refused(tmp_path):
    (tmp_path / "02_a.py").write_text("assert True\n# %% Exercise 2.1\nassert True\n")
    with pytest.raises(ExerciseMarkupError, match="before the first"):
        exercises.hidden_checks(tmp_path, "02_transformer_from_scratch")
    (tmp_path / "02_a.py").write_text("# %% Exercise 2.99\nassert True\n")
    with pytest.raises(ExerciseMarkupError, match="2.99"):
        exercises.grade(ROOT / "notebooks" / "02_transformer_from_scratch.py", tmp_path, executor=exercises.InProcess())
    with pytest.raises(FileNotFoundError, match="no such folder"):
        exercises.hidden_checks(tmp_path / "missing", "02_x")


def test_an_error_outside_any_exercise_stops_the_run_and_is_reported(tmp_path):
    path = tmp_path / "09_demo.py"
    path.write_text(
        "# %% [markdown]\n# ## Exercise 9.1 · One (2 points)\n\n"
        "# %%\nx = 1  # SOLUTION\n\n# %% tags=['check']\nassert x == 1\n\n"
        "# %% [markdown]\n# ## Between\n\n# %%\nraise ValueError('broken set-up')\n\n"
        "# %% [markdown]\n# ## Exercise 9.2 · Two (3 points)\n\n"
        "# %%\ny = 2  # SOLUTION\n\n# %% tags=['check']\nassert y == 2\n"
    )
    result = exercises.grade(path, executor=exercises.InProcess())
    assert [r.status for r in result.results] == ["passed", "not attempted"]
    assert "outside any exercise" in result.stopped and "broken set-up" in result.stopped
    assert result.total == 2 and "Total: 2/5 points" in result.table()


# ---------------------------------------------------------------------------------------------
# the catalogue of wrong answers: each entry replaces text inside one exercise's solution


CATALOGUE = [
    # notebook 01
    (
        "01",
        "1.1",
        "softmax over the queries",
        [("softmax(scores, dim=-1)  # normalise over the keys", "softmax(scores, dim=-2)  # normalise over the keys")],
        "IndexError",
    ),
    (
        "01",
        "1.1",
        "scores divided by sqrt(d)",
        [("scores = q @ K.transpose(-2, -1)", "scores = q @ K.transpose(-2, -1) / q.size(-1) ** 0.5")],
    ),
    ("01", "1.1", "values weighted by the scores", [("return alpha @ V, alpha", "return scores @ V, alpha")]),
    ("01", "1.1", "weights not returned", [("return alpha @ V, alpha", "return alpha @ V, scores")]),
    ("01", "1.2", "the largest gap instead of the smallest", [("gap.min().item()", "gap.max().item()")]),
    ("01", "1.2", "the gap left out", [("math.exp(-s * gap.min().item())", "math.exp(-s)")]),
    ("01", "1.2", "the mean gap instead of the smallest", [("gap.min().item()", "gap.mean().item()")]),
    ("01", "1.2", "the n - 1 other keys left out", [("(len(K) - 1) * math.exp", "math.exp")]),
    (
        "01",
        "1.3",
        "n keys instead of the n - 2 others",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log(n * (1 / tau - 0.5))")],
    ),
    (
        "01",
        "1.3",
        "2 eps <= tau solved as eps <= tau",
        [("math.log((n - 2) * (1 / tau - 0.5))", "math.log((n - 2) * (1 / tau - 1))")],
    ),
    ("01", "1.3", "no logarithm", [("math.log((n - 2) * (1 / tau - 0.5))", "(n - 2) * (1 / tau - 0.5)")]),
    ("01", "1.4", "divided by d", [("return 1 / math.sqrt(d)", "return 1 / d")]),
    ("01", "1.4", "not scaled", [("return 1 / math.sqrt(d)", "return 1.0")]),
    ("01", "1.4", "fourth root", [("return 1 / math.sqrt(d)", "return d**-0.25")]),
    # notebook 02
    (
        "02",
        "2.1",
        "sin and cos swapped",
        [("0::2] = torch.sin(", "0::2] = torch.cos("), ("1::2] = torch.cos(", "1::2] = torch.sin(")],
    ),
    ("02", "2.1", "frequencies over max_len", [("(-math.log(10000.0) / d_model)", "(-math.log(10000.0) / max_len)")]),
    ("02", "2.1", "positions counted from 1", [("torch.arange(max_len, dtype", "torch.arange(1, max_len + 1, dtype")]),
    ("02", "2.2", "no 1/sqrt(d_k)", [("k.transpose(-2, -1) / math.sqrt(q.size(-1))", "k.transpose(-2, -1)")]),
    ("02", "2.2", "softmax over the wrong axis", [("scores.softmax(dim=-1)", "scores.softmax(dim=-2)")]),
    (
        "02",
        "2.2",
        "mask applied after the softmax",
        [
            (
                "    if mask is not None:\n        scores = scores.masked_fill",
                "    if False:\n        scores = scores.masked_fill",
            ),
            (
                "weights = scores.softmax(dim=-1)  # over keys: each row sums to 1",
                "weights = scores.softmax(dim=-1)\n    weights = weights if mask is None else weights.masked_fill(~mask, 0.0)",
            ),
        ],
    ),
    (
        "02",
        "2.2",
        "masked scores set to 0, not -inf",
        [('masked_fill(~mask, float("-inf"))', "masked_fill(~mask, 0.0)")],
    ),
    (
        "02",
        "2.3",
        "heads merged without the transpose",
        [("t.transpose(1, 2).reshape(B, T, nh * hs)", "t.reshape(B, T, nh * hs)")],
    ),
    (
        "02",
        "2.3",
        "heads split without the transpose",
        [
            (
                "t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)",
                "t.view(B, self.n_head, T, C // self.n_head)",
            )
        ],
        "RuntimeError",
    ),
    ("02", "2.3", "no output projection", [("return self.proj(self.merge_heads(y))", "return self.merge_heads(y)")]),
    (
        "02",
        "2.4",
        "upper triangle: sees the future",
        [
            (
                "return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
                "return torch.triu(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
            )
        ],
    ),
    (
        "02",
        "2.4",
        "a position cannot see itself",
        [
            (
                "return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
                "return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # (T, T)",
            )
        ],
    ),
    (
        "02",
        "2.4",
        "no mask at all",
        [
            (
                "return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
                "return torch.ones(T, T, dtype=torch.bool)  # (T, T)",
            )
        ],
    ),
    (
        "02",
        "2.5",
        "prefix opened to the queries: the source reads the target",
        [("| in_prefix[:, None, :])", "| in_prefix[:, :, None])")],
    ),
    (
        "02",
        "2.5",
        "causal only",
        [("(causal_mask(T)[None] | in_prefix[:, None, :])", "(causal_mask(T)[None] | in_prefix[:, None, :] & False)")],
    ),
    (
        "02",
        "2.5",
        "prefix one token too long",
        [("torch.arange(T)[None, :] < prefix_len[:, None]", "torch.arange(T)[None, :] <= prefix_len[:, None]")],
    ),
    ("02", "2.6", "ReLU instead of GELU", [("self.proj(F.gelu(self.fc(x)))", "self.proj(F.relu(self.fc(x)))")]),
    ("02", "2.6", "no activation", [("self.proj(F.gelu(self.fc(x)))", "self.proj(self.fc(x))")]),
    ("02", "2.6", "tanh instead of GELU", [("self.proj(F.gelu(self.fc(x)))", "self.proj(torch.tanh(self.fc(x)))")]),
    (
        "02",
        "2.7",
        "no residual around attention",
        [("x = x + self.attn(self.ln1(x), mask)", "x = self.attn(self.ln1(x), mask)")],
    ),
    (
        "02",
        "2.7",
        "post-LN: the sum normalised",
        [
            ("x = x + self.attn(self.ln1(x), mask)", "x = self.ln1(x + self.attn(x, mask))"),
            ("return x + self.ffn(self.ln2(x))", "return self.ln2(x + self.ffn(x))"),
        ],
    ),
    ("02", "2.7", "ln1 used twice", [("return x + self.ffn(self.ln2(x))", "return x + self.ffn(self.ln1(x))")]),
    (
        "02",
        "2.8",
        "head not tied",
        [("self.lm_head.weight = self.tok_emb.weight  # weight tying", "pass  # weight tying")],
    ),
    (
        "02",
        "2.8",
        "positions never added",
        [("return self.tok_emb(ids) + self.pos_emb(pos)", "return self.tok_emb(ids)")],
    ),
    (
        "02",
        "2.8",
        "prefix_len ignored: always causal",
        [("mask = causal_mask(T) if prefix_len is None else prefix_lm_mask(T, prefix_len)", "mask = causal_mask(T)")],
    ),
    ("02", "2.9", "biases forgotten", [("(3 * C * C + 3 * C) + (C * C + C)", "(3 * C * C) + (C * C)")]),
    ("02", "2.9", "tied head counted twice", [("return V * C + positions", "return 2 * V * C + positions")]),
    ("02", "2.9", "final LayerNorm forgotten", [("L * per_block + 2 * C", "L * per_block")]),
    ("02", "2.10", "labels not shifted", [("labels[:, :-1] = ids[:, 1:]", "labels[:, :] = ids")]),
    ("02", "2.10", "loss on source tokens", [("labels[next_pos[None, :] < prefix_len[:, None]] = -100", "pass")]),
    ("02", "2.10", "padding kept as a target", [("labels[labels == pad_id] = -100", "pass")]),
    (
        "02",
        "2.10",
        "source cut one position off",
        [("next_pos = torch.arange(1, ids.size(1) + 1)", "next_pos = torch.arange(ids.size(1))")],
    ),
    (
        "02",
        "2.11",
        "cache position off by one",
        [("start = cache[0][0].size(2) if cache else 0", "start = cache[0][0].size(2) + 1 if cache else 0")],
    ),
    ("02", "2.11", "cache never grows", [("cache[layer] = (k, v)", "pass")]),
    ("02", "2.11", "positions restart at 0", [("start = cache[0][0].size(2) if cache else 0", "start = 0")]),
    ("02", "2.11", "LayerNorm skipped before attention", [("attn.qkv(block.ln1(x))", "attn.qkv(x)")]),
    # notebook 03
    ("03", "3.1", "gradients never zeroed", [("run.optimizer.zero_grad(set_to_none=True)", "pass")]),
    (
        "03",
        "3.1",
        "loss without label smoothing",
        [("T.loss_fn(logits, labels, cfg.label_smoothing)", "T.loss_fn(logits, labels)")],
    ),
    ("03", "3.1", "causal mask: prefix_len not passed", [("logits = model(ids, plen)", "logits = model(ids)")]),
    (
        "03",
        "3.1",
        "no gradient clipping",
        [("clip_grad_norm_(model.parameters(), cfg.grad_clip)", 'clip_grad_norm_(model.parameters(), float("inf"))')],
    ),
    # notebook 04
    ("04", "4.1", "loss on the prompt too", [('"labels": [-100] * len(prompt) + target', '"labels": prompt + target')]),
    (
        "04",
        "4.1",
        "no <eos>: the model never learns to stop",
        [('target = ids(" " + en) + [tokenizer.eos_token_id]', 'target = ids(" " + en)')],
    ),
    ("04", "4.1", "no space before the English", [('ids(" " + en)', "ids(en)")]),
    # notebook 05
    ("05", "5.1", "no ReLU", [("h = torch.relu(w1(x)).view(", "h = w1(x).view(")]),
    ("05", "5.1", "the mask not applied", [('scores.masked_fill(~mask, float("-inf")), dim=-1)', "scores, dim=-1)")]),
    (
        "05",
        "5.1",
        "softmax over the queries",
        [('float("-inf")), dim=-1)  # over the keys', 'float("-inf")), dim=-2)')],
    ),
    ("05", "5.1", "b2 left out", [("scores = h @ w2[:, :, :T] + b2[:, None, :T]", "scores = h @ w2[:, :, :T]")]),
    (
        "05",
        "5.2",
        "a key may not be read at its own horizon",
        [("ok = k_horizon[None, None, :] <= q_horizon", "ok = k_horizon[None, None, :] < q_horizon")],
    ),
    (
        "05",
        "5.2",
        "the source rule left out",
        [("return (ok | source_only)[:, None]", "return ok.expand(len(prefix_len), -1, -1)[:, None]")],
    ),
    (
        "05",
        "5.2",
        "the <sep> counted as target",
        [
            (
                "k_horizon[None, None, :] < prefix_len[:, None, None]",
                "k_horizon[None, None, :] < prefix_len[:, None, None] - 1",
            )
        ],
    ),
    (
        "04",
        "4.1",
        "prompt tokenized in pieces",
        [('ids("French: " + fr + "\\nEnglish:")', 'ids("French: ") + ids(fr) + ids("\\nEnglish:")')],
    ),
]


def test_the_catalogue_has_three_wrong_answers_for_every_exercise():
    per_exercise = {}
    for nb, number, *_ in CATALOGUE:
        per_exercise.setdefault((nb, number), 0)
        per_exercise[(nb, number)] += 1
    every = {(py.stem[:2], e.number) for py in SOURCES for e in exercises.find_exercises(notebooks._read_py(py))}
    assert set(per_exercise) == every, f"exercises without wrong answers: {sorted(every - set(per_exercise))}"
    assert min(per_exercise.values()) >= 3, per_exercise


@functools.cache
def _snapshots(number: str) -> dict[str, dict]:
    """The namespace right before each exercise of notebook `number` (one in-process run, solutions in place)."""
    path = notebooks.notebook_sources([number])[0]
    nb = notebooks._read_py(path)
    starts = {e.heading_cell: e.number for e in exercises.find_exercises(nb)}
    executor, snaps = exercises.InProcess(), {}
    with executor.session():
        for index, cell in enumerate(nb.cells):
            if index in starts:
                snaps[starts[index]] = dict(executor.namespace)
                if len(snaps) == len(starts):
                    break
            if cell.cell_type == "code":
                assert executor.run(cell.source, f"cell {index}") is None, f"notebook {number} cell {index} failed"
    return snaps


def _grade_alone(number: str, exercise: str, source: str, tmp_path: Path) -> exercises.Grade:
    path = tmp_path / notebooks.notebook_sources([number])[0].name
    path.write_text(source)
    executor = exercises.InProcess(dict(_snapshots(number)[exercise]))
    return exercises.grade(path, executor=executor, start_at=exercise, stop_after=exercise)


@pytest.mark.parametrize(
    "number, exercise",
    [
        ("01", "1.1"),
        ("01", "1.4"),
        ("02", "2.1"),
        ("02", "2.5"),
        ("02", "2.11"),
        ("04", "4.1"),
        ("05", "5.1"),
        ("05", "5.2"),
    ],
)
def test_an_exercise_graded_alone_from_its_snapshot_passes_with_the_solution(number, exercise, tmp_path):
    """The control for the catalogue: the starting namespace is sound, so a failure below is the mistake's."""
    source = notebooks.notebook_sources([number])[0].read_text()
    result = _grade_alone(number, exercise, source, tmp_path)
    assert result.status_of(exercise) == "passed", result.table()


@pytest.mark.parametrize(
    "number, exercise, name, replacements, error",
    [(*entry, "AssertionError") if len(entry) == 4 else entry for entry in CATALOGUE],
    ids=[f"{e[1]}-{e[2]}" for e in CATALOGUE],
)
def test_each_wrong_answer_fails_its_own_exercise_and_no_other(number, exercise, name, replacements, error, tmp_path):
    path = notebooks.notebook_sources([number])[0]
    source = path.read_text()
    nb = notebooks._read_py(path)
    target = next(e for e in exercises.find_exercises(nb) if e.number == exercise)
    solution = "\n".join(line for i in target.cells for line in exercises.solution_lines(nb.cells[i].source))
    for old, new in replacements:
        assert source.count(old) == 1, f"{old!r} should occur once in {path.name}"
        first_line = old.strip().splitlines()[0].strip()
        assert first_line in solution, f"{old!r} is not in Exercise {exercise}'s solution"
        source = source.replace(old, new)
    result = _grade_alone(number, exercise, source, tmp_path)
    failed = [r.number for r in result.results if r.status == "failed"]
    assert failed == [exercise], f"{name}: expected Exercise {exercise} alone to fail\n{result.table()}"
    assert result.results[[r.number for r in result.results].index(exercise)].message.startswith(error), result.table()

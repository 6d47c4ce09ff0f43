"""What some checks hold a student's answer against, kept out of the notebooks because it is part of the answer.

A check shows its code in the student copy. Where that code would spell out what an exercise or a question asks
(the keys and values where a bound is reached, the rule a mask follows), it lives here and the check cell calls it
through the module (``check_inputs.worst_copy_case(...)``, so that the guard's stand-in is what every call meets):

- :func:`exact_softmax` (notebook 01, Exercise 1.2): softmax weights by the textbook formula in exact decimal
  arithmetic, where e^1000 is an ordinary number (a check that wrote them out in floats wrote the stable softmax);
- :func:`worst_copy_case`, :func:`worst_average_case` (notebook 01, Exercises 1.4 and 1.6): keys and values that
  make an attention error as large as it can be, so that a bound can be held to it from both sides; where they lie
  is part of Question 1.2's model answer and of what Question 1.3 asks;
- :func:`attention_by_loops` (notebook 02, Exercises 2.2, 2.3 and 2.7): attention one query at a time in plain
  Python, whose scale is Question 1.9's answer;
- :func:`check_block_stream` (notebook 02, Exercise 2.7): a check, kept here because its two comparisons are the
  pre-LN block itself: what the block returns and what each sub-layer reads, against its input and what its
  sub-layers returned;
- :func:`check_mask_entries` (notebook 02, Exercises 2.4 and 2.5, and notebook 03's 3.2 with padding): a check
  rather than an input, kept here because its rule is the exercises' answer: a mask compared entry by entry, the
  first wrong entry named;
- :func:`drawn_answer_sets` (notebook 06, Exercise 6.1): answers written the ways a grader's table shows, whose
  making spells out the rule the exercise asks a student to infer from the table.

While an exercise that they answer is graded, the guard (:data:`helpers.course.guard.REFERENCES`) puts them out of
the student's reach, as it does the package's own solutions.
"""

from __future__ import annotations

import decimal
import math
import random

import torch
import torch.nn.functional as F


def exact_softmax(rows: list[list[float]], digits: int = 40) -> list[list[float]]:
    """Each row's softmax by the textbook formula, exp then divide, in ``digits``-digit decimal arithmetic (its
    exponents reach far beyond float64's), each weight then rounded to the nearest float."""
    with decimal.localcontext() as ctx:
        ctx.prec = digits
        weights = []
        for row in rows:
            e = [decimal.Decimal(s).exp() for s in row]
            weights.append([float(x / sum(e)) for x in e])
    return weights


def worst_copy_case(n: int, gap: float, spread: float, dtype: torch.dtype = torch.float64):
    """The n unit keys (n, n) and values (n, 1) whose copy error, for Exercise 1.3's copying query of key 0, is the
    largest these numbers allow (0 < gap <= 2)."""
    if not 0 < gap <= 2:
        raise ValueError(f"gap must lie in (0, 2] for unit keys, got {gap!r}")
    # every other key at exactly the gap from key 0, every other value at exactly the spread from value 0
    K = torch.zeros(n, n, dtype=dtype)
    K[0, 0] = 1.0
    K[1:, 0] = 1 - gap
    K[1:, 1:] = math.sqrt(1 - (1 - gap) ** 2) * torch.eye(n - 1, dtype=dtype)  # each row has norm 1
    V = torch.zeros(n, 1, dtype=dtype)
    V[1:] = spread
    return K, V


def worst_average_case(n: int, a: int = 0, b: int = 1, dtype: torch.dtype = torch.float64):
    """n orthonormal keys and the values, with max_i ||v_i|| = 1, that an average of v_a and v_b misses the most."""
    K = torch.eye(n, dtype=dtype)
    V = -torch.ones(n, 1, dtype=dtype)
    V[[a, b]] = 1.0
    return K, V


def attention_by_loops(q, k, v, mask):
    """Attention in plain Python, one query at a time: q, k, v are lists of vectors (lists of floats), mask[i][j] a
    bool (True = query i may read key j). Returns (outputs, weights) as lists."""
    d_k, out, weights = len(q[0]), [], []
    for i, qi in enumerate(q):
        scores = [sum(a * b for a, b in zip(qi, kj)) / math.sqrt(d_k) if mask[i][j] else None for j, kj in enumerate(k)]
        top = max(s for s in scores if s is not None)
        e = [math.exp(s - top) if s is not None else 0.0 for s in scores]
        w_i = [x / sum(e) for x in e]
        weights.append(w_i)
        out.append([sum(w_i[j] * v[j][c] for j in range(len(v))) for c in range(len(v[0]))])
    return out, weights


def check_block_stream(x, out, attn_in, attn_out, ffn_in, ffn_out, ln1, ln2, atol: float = 1e-5) -> None:
    """Guarantees 1 and 2 of Exercise 2.7 on one call of a block: ``x`` what entered it, ``out`` what it returned,
    ``attn_in``/``attn_out`` and ``ffn_in``/``ffn_out`` what its sub-layers received and returned, ``ln1``/``ln2``
    each LayerNorm's (weight, bias). Fails on the first guarantee broken, naming it."""
    if not torch.allclose(out, x + attn_out + ffn_out, atol=atol):
        raise AssertionError("guarantee 1: the block's output is not its input plus what the two sub-layers returned")
    if attn_in is None or not torch.allclose(attn_in, F.layer_norm(x, x.shape[-1:], *ln1), atol=atol):
        raise AssertionError("guarantee 2: what attention received is not the stream as it entered, normalised by ln1")
    if ffn_in is None or not torch.allclose(ffn_in, F.layer_norm(x + attn_out, x.shape[-1:], *ln2), atol=atol):
        raise AssertionError(
            "guarantee 2: what the feed-forward received is not the stream as it stood after attention, normalised by "
            "ln2"
        )


def check_mask_entries(
    mask: torch.Tensor, T: int, prefix_lengths: list[int] | None = None, lengths: list[int] | None = None
) -> None:
    """``mask`` (..., T, T) for the causal rule, or (B, ..., T, T) for the prefix-LM rule, one prefix length per row;
    ``lengths`` (prefix-LM only): each row's real tokens, the keys after them padding that nothing may read.

    True = query i may attend to key j; an entry counts as True when it is True along every leading dimension (a
    (1, 1, T, T) mask is one (T, T) mask). Fails on the first wrong entry, saying what that entry must be.
    """
    if prefix_lengths is not None and len(prefix_lengths) == 0:
        raise ValueError("prefix_lengths is empty: give one prefix length per row of the mask, or None for causal")
    if lengths is not None and (prefix_lengths is None or len(lengths) != len(prefix_lengths)):
        raise ValueError("lengths needs prefix_lengths, one of each per row of the mask")
    rows = [None] if prefix_lengths is None else list(prefix_lengths)
    for b, p in enumerate(rows):
        m = mask if p is None else mask[b]
        n = T if lengths is None else lengths[b]
        for i in range(T):
            for j in range(T):
                # written out, not helpers.nn.model's build_attention_mask: course machinery imports only the ground
                # (tests/course/test_check_inputs.py holds the two to the same mask)
                allowed = (j <= i if p is None else (j <= i or j < p)) and j < n
                if bool(m[..., i, j].all()) == allowed:
                    continue
                should = "must" if allowed else "must not"
                if p is None:
                    raise AssertionError(f"query {i} {should} see key {j}")
                if j >= n:
                    raise AssertionError(
                        f"row {b} (length {n}, prefix {p}): query {i} must not see key {j}: it is padding"
                    )
                length = "" if lengths is None else f"length {n}, "
                raise AssertionError(
                    f"row {b} ({length}prefix {p}): query {i} {should} see key {j}; sources see the whole source, "
                    "targets see the source and earlier targets, nothing sees a later target"
                )


def drawn_answer_sets(seed: int, places: list[str], n_sets: int = 300) -> list[tuple[list[str], list[str]]]:
    """(predictions, answers) sets drawn from ``seed``: each answer a place of ``places``, each prediction that place
    written one of the ways the grader's table of Exercise 6.1 shows (every mark drawn here, around a place or at its
    end, is in a row of that table: tests/notebooks/test_notebook06.py)."""
    draw, sets = random.Random(seed), []
    for _ in range(n_sets):
        answers = draw.choices(places, k=draw.randint(1, 6))
        made = []
        for a in answers:
            a = draw.choice([a, a.upper(), a.lower(), a.replace(" ", "   "), a + draw.choice(".!?,;"), a[:-1], a + "s"])
            made.append(draw.choice(["", " ", '"', "("]) + a + draw.choice(["", " ", '"', ")", ". "]))
        sets.append((made, answers))
    return sets

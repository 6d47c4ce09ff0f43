# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] tags=["badge"]
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/02_transformer_from_scratch.ipynb) [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/02_transformer_from_scratch.ipynb)
#
# **Solutions**: the solved notebook, with model answers and grading rubrics. Learners start from the exercise version, [`notebooks/02_transformer_from_scratch.ipynb`](https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/02_transformer_from_scratch.ipynb).

# %% [markdown]
# # 02 · A decoder-only Transformer, built cell by cell
#
# In this notebook we build, one piece at a time, the model the rest of the course trains to translate
# French into English: token embeddings, positions, scaled dot-product attention, several heads,
# masks, a feed-forward network, residual blocks with LayerNorm, and the full model with tied weights.
# Then we train it on six sentences until it knows them by heart, and make it translate with a
# key/value cache.
#
# After every idea comes a **check** cell: a small function that compares our code with a reference
# computed a *different* way (loops over positions and heads in plain Python, small examples worked by
# hand). The checks catch the mistakes people really make: softmax over the wrong dimension, scores
# left unscaled, a mask applied after the softmax, heads merged in the wrong order, and others.
#
# **Later notebooks import the same model from `helpers.nn.model`** (`DecoderOnlyTransformer`). At the end we
# load this notebook's weights into it and require identical outputs, so the package is exactly what
# you built here, plus dropout, input checks and batched beam search.

# %% tags=["parameters"]
# @title Set-up: install the course and check the runtime { display-mode: "form" }
# On Colab this installs the course package at these notebooks' release (from a copy in Drive first, if
# any) and what the runtime lacks, never torch, or says what to do. QUICK=1 shrinks sizes and steps.
COURSE = "git+https://github.com/transformers-by-building/course@v0.3.0"
COURSE_IN_DRIVE = "/content/drive/MyDrive/transformers-by-building/course"  # a folder or .zip of the repository


def ensure_course(pinned, drive_copy, version, *, install=None, pip_args=()):
    """Install the course package unless it is here; return where it came from and what the runtime had before."""
    import importlib.metadata
    import importlib.util
    import os
    import subprocess
    import sys

    class CourseSetupError(RuntimeError):
        def _render_traceback_(self):  # Jupyter shows these lines instead of a traceback
            return ["Course set-up failed.", *str(self).splitlines()]

    if any(d.version == version for d in importlib.metadata.distributions(name="transformers-by-building")):
        return "already installed", None
    kaggle = "KAGGLE_KERNEL_RUN_TYPE" in os.environ  # a Kaggle notebook: no Drive, and its internet may be off
    if not ("google.colab" in sys.modules or kaggle if install is None else install):
        if importlib.util.find_spec("helpers") is None:  # a checkout that this kernel's Python cannot import
            raise CourseSetupError("This kernel can't import the course: pip install -e . in its folder, then restart.")
        return "this checkout (not on Colab or Kaggle)", None
    # what the runtime had and had loaded, so that after_install can say what pip replaced (pip runs apart)
    before = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()}, set(sys.modules)
    sources, tried = [("the pinned release", pinned)], []
    if not kaggle and (os.path.isdir(drive_copy) or str(drive_copy).endswith(".zip") and os.path.isfile(drive_copy)):
        sources.insert(0, ("the copy in Drive", drive_copy))
    for label, target in sources:
        print(f"Installing the course package from {label}: {target}", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--upgrade-strategy", "only-if-needed", *pip_args, target]
        done = subprocess.run(pip, capture_output=True, text=True, encoding="utf-8", errors="replace")
        if done.returncode == 0:
            importlib.invalidate_caches()  # so that the import right after this finds the new package
            return label, before
        why = (done.stderr or done.stdout).strip().splitlines() or ["pip failed"]  # pip's last line says why
        tried.append(f"  - {label}: {why[-1].strip()}")
    first = "Turn Internet on in Session options (the right-hand panel)" if kaggle else "Check this runtime's internet"
    raise CourseSetupError(
        "The course package could not be installed. Tried:\n" + "\n".join(tried) + "\nTwo ways out:\n"
        f"  1. {first}, then run this cell again.\n"
        f"  2. Put the course repository (its folder, or the .zip GitHub gives you) in Google Drive at {drive_copy},\n"
        "     mount Drive (Files panel > Mount Drive), then run this cell again (on Colab)."
    )


installed_from, before_install = ensure_course(COURSE, COURSE_IN_DRIVE, version=COURSE.rsplit("@v", 1)[1])
from helpers.course import bootstrap  # importable now: it says what pip replaced, and when to restart

bootstrap.after_install(installed_from, before_install)
from helpers import runtime
from helpers.course import colab

QUICK = runtime.quick_mode()
SEED = 0
ACCELERATOR = colab.setup()

# %%
# Sizes. Everything here is tiny, so the notebook runs on the CPU even when a GPU is present.
D_MODEL, N_HEAD, N_LAYER = (32, 4, 2) if QUICK else (64, 4, 2)
MAX_LEN = 16  # longest sequence the model accepts (prefix + target)
POSITIONAL = (
    "rotary"  # or "learned", "sinusoidal" (the table of Exercise 2.1): the switch used when the model is assembled
)
TRAIN_STEPS = 100 if QUICK else 300
LEARNING_RATE = 5e-3

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers.course import probes  # probes.close: the checks' comparison, shapes included
from helpers.course.plotting import save_figure
from helpers.nn.model import ModelConfig  # only the config dataclass: the model itself we write below

runtime.set_seed(SEED)
torch.set_printoptions(precision=3, sci_mode=False, linewidth=120)

# %% [markdown]
# ## Translation as one sequence
#
# A decoder-only model reads one sequence of tokens. We write a translation pair as
#
# `<bos> le chat noir dort <sep> the black cat sleeps <eos>`
#
# The part up to and including `<sep>` is the **prefix** (the source); the rest is the **target**. The model
# learns to predict each next token; at translation time we give it the prefix and let it continue until
# it writes `<eos>`. The loss is taken on target tokens only: the French is given, not predicted.
#
# Six hand-written pairs and a word-level vocabulary are all we need in this notebook (notebook 03 brings
# real data and a subword tokenizer). Note the word order: French puts most adjectives *after* the noun.

# %%
PAIRS = [
    ("le chat noir dort", "the black cat sleeps"),
    ("le chien blanc mange", "the white dog eats"),
    ("la maison rouge", "the red house"),
    ("un chat blanc mange", "a white cat eats"),
    ("le chien noir dort", "the black dog sleeps"),
    ("une maison blanche", "a white house"),
]
SPECIALS = ["<pad>", "<bos>", "<sep>", "<eos>"]
PAD, BOS, SEP, EOS = 0, 1, 2, 3  # written out, not range(4), so that the checks can read them
vocab = SPECIALS + sorted({w for fr, en in PAIRS for w in f"{fr} {en}".split()})
stoi = {w: i for i, w in enumerate(vocab)}


def encode_prefix(fr):
    return [BOS] + [stoi[w] for w in fr.split()] + [SEP]


def encode_pair(fr, en):
    prefix = encode_prefix(fr)
    return prefix + [stoi[w] for w in en.split()] + [EOS], len(prefix)


seq, plen = encode_pair(*PAIRS[0])
print(f"{len(vocab)} tokens in the vocabulary")
for i, t in enumerate(seq):
    print(f"position {i}: {vocab[t]:>7} (id {t:2d})  {'source' if i < plen else 'target'}")

# %% [markdown]
# Sentences have different lengths, so a batch is **right-padded** with `<pad>`; `prefix_len` records
# where each row's source ends. Padding sits after every real token.


# %%
def make_batch(pairs):
    encoded = [encode_pair(fr, en) for fr, en in pairs]
    T = max(len(s) for s, _ in encoded)
    ids = torch.full((len(encoded), T), PAD, dtype=torch.long)
    for row, (s, _) in enumerate(encoded):
        ids[row, : len(s)] = torch.tensor(s)
    return ids, torch.tensor([p for _, p in encoded])


ids, prefix_len = make_batch(PAIRS)
print("ids", tuple(ids.shape), "\n", ids, "\nprefix_len", prefix_len)

# %% [markdown]
# ## Token embedding
#
# Each token id selects one row of a learned matrix of shape (vocabulary, `d_model`). From now on every
# position carries a vector of `D_MODEL` numbers.

# %%
tok_emb = nn.Embedding(len(vocab), D_MODEL)
x = tok_emb(ids)
print("ids", tuple(ids.shape), "-> vectors", tuple(x.shape))

# %% [markdown]
# ## Exercise 2.1 · Positions: a fixed table, and a rotation (4 points)
#
# Attention, which we write next, compares every position with every other and sums the results. What it
# makes of word order is Question 1.8 of notebook 01: answer it there. Models that give it positions use one of
# three common choices:
#
# * **learned**: another embedding table, indexed by position, added to each token vector (GPT-2 does this);
# * **sinusoidal**: a fixed table (Vaswani et al., 2017), added the same way, which you construct first;
# * **rotary**: nothing added; inside attention each query and key is *turned* by its position, with the maps
#   that make the fixed table work (you write that second). Our model uses it (notebook 05, section 6, compares
#   the schemes at the same budget).
#
# `POSITIONAL` in the parameters cell switches between them.
#
# **What the fixed table must do.** Its $d$ columns come in $d/2$ pairs: pair $i$ is columns $2i$ and
# $2i+1$. Write $e_i(p) = (a, b)$ for pair $i$'s two numbers in row $p$ (column $2i$ first).
#
# 1. **Start.** Row 0 holds $e_i(0) = (0, 1)$ for every pair.
# 2. **A shift is one fixed linear map.** Moving $k$ positions along turns every pair by its own angle, the
#    same from every starting row: $e_i(p + k) = R(k\,\omega_i)\, e_i(p)$ for all $p$ and $k$, where
#    $R(\theta)$ sends $(a, b)$ to $(a\cos\theta + b\sin\theta,\; b\cos\theta - a\sin\theta)$. So
#    "the word $k$ places back" is the same linear map of the table at every position, something attention's
#    projections can learn once. $\omega_i$ is pair $i$'s speed in radians per position; $2\pi/\omega_i$
#    positions is its wavelength.
# 3. **Wavelengths from $2\pi$ towards $10000 \cdot 2\pi$, evenly on a log scale.** Pair 0 turns one
#    radian per position. Each pair turns slower than the one before by the same factor, and that factor,
#    applied $d/2$ times, slows a pair down exactly 10000 times (so a pair $d/2$, one past the last, would
#    have wavelength $10000 \cdot 2\pi$). Fast pairs tell neighbours apart, slow ones far-apart positions.
#
# Work out from these three what row $p$, column $c$ holds: what does $R$ do to $(0, 1)$, and what is
# $\omega_i$? Then build the whole table with tensor operations. The check tests the three properties on
# your table, not a formula.


# %%
def sinusoidal_positions(max_len, d_model):
    """(max_len, d_model) float32: the table with the three properties above, for positions 0 .. max_len - 1."""
    # BEGIN SOLUTION
    # R(theta) turns (0, 1) into (sin theta, cos theta), so e_i(p) = (sin(p w_i), cos(p w_i)); the speeds are
    # w_i = r^i with r^(d/2) = 1/10000, i.e. w_i = exp(-2i ln(10000) / d)
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))  # (d/2,)
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(pos * freq)  # even columns: sine
    table[:, 1::2] = torch.cos(pos * freq)  # odd columns: the cosine of the same angle
    return table
    # END SOLUTION


print(sinusoidal_positions(MAX_LEN, D_MODEL)[:4, :6])


# %% tags=["check"]
def sinusoidal_sizes(seed):
    """The (max_len, d) of the tables the check asks for: two fixed ones and one drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    drawn = (int(torch.randint(5, 60, (1,), generator=g)), 2 * int(torch.randint(2, 17, (1,), generator=g)))
    return [(7, 6), (40, 16), drawn]


def probe_sinusoidal(positions_fn, seed=0):
    """Runs your function: the tables it makes, as they are (the grader runs this with a seed of its own)."""
    return [positions_fn(max_len, d) for max_len, d in sinusoidal_sizes(seed)]


def verify_sinusoidal(tables, seed=0):
    """Test the three properties on the tables alone: the start row, the same turn of each pair from every row, and
    the pairs' speeds (read off the table as the angle each pair turns from row 0 to row 1)."""
    assert len(tables) == len(sinusoidal_sizes(seed)), f"expected {len(sinusoidal_sizes(seed))} tables"
    for (max_len, d), table in zip(sinusoidal_sizes(seed), tables):
        assert tuple(table.shape) == (max_len, d), f"expected shape {(max_len, d)}, got {tuple(table.shape)}"
        t = table.double()
        a, b = t[:, 0::2], t[:, 1::2]  # (max_len, d/2) each: the two numbers of every pair, in every row
        start = torch.tensor([0.0, 1.0], dtype=torch.float64).repeat(d // 2)
        assert probes.close(t[0], start, atol=1e-6), f"property 1 (start): row 0 of a ({max_len}, {d}) table is {t[0]}"
        # the angle that takes row 0 to row 1 under R, pair by pair (R(theta) (a, b) = (a c + b s, b c - a s))
        turn = torch.atan2(a[1] * b[0] - b[1] * a[0], a[1] * a[0] + b[1] * b[0])  # (d/2,)
        for k in (1, 2, 5):
            c, s = torch.cos(k * turn), torch.sin(k * turn)
            moved = torch.stack((a[:-k] * c + b[:-k] * s, b[:-k] * c - a[:-k] * s))  # R(k w_i) e_i(p), every p
            assert probes.close(moved, torch.stack((a[k:], b[k:])), atol=1e-5), (
                f"property 2 (a shift is one fixed map): moving {k} positions along is not R(k w_i) "
                f"in every row of a ({max_len}, {d}) table, with w_i the turn from row 0 to row 1"
            )
        assert abs(turn[0].item() - 1.0) < 1e-5, (
            f"property 3: pair 0 should turn by +1 radian per position, it turns by {turn[0].item():.6f}"
        )
        factor = turn[1:] / turn[:-1]  # how much slower each pair turns than the one before
        assert probes.close(factor, factor.mean().expand_as(factor), rtol=1e-4), (
            f"property 3: each pair should be slower than the one before by the same factor; the factors are {factor}"
        )
        slowdown = (1.0 / factor.mean()) ** (d // 2)
        assert abs(slowdown.item() / 10000 - 1) < 1e-4, (
            f"property 3: the factor applied d/2 = {d // 2} times slows a pair {slowdown.item():.2f} times, not 10000"
        )


verify_sinusoidal(probe_sinusoidal(sinusoidal_positions))
print("✓ the table has the three properties")

# %% [markdown]
# **The second way: turn queries and keys instead of adding.** Attention (Exercises 2.2 and 2.3) scores a query
# $q$ against a key $k$ by their dot product. Rotary positions (RoPE, Su et al. 2021; LLaMA and most recent
# language models use them) turn every query and every key by its own position before that product, with
# rotations like the table's property 2, and add nothing to the tokens. Notebook 05 asks you to prove what this
# does to $q \cdot k$.
#
# Write `rotate_pairs(x, positions)`: `x` holds vectors of an even width $h$ (one head's queries or keys: in
# Exercise 2.3, $h$ = `d_model / n_head`), row $t$ at position `positions[t]` (an integer tensor of shape (T,)).
# Pair $i$ is channels $2i$ and $2i+1$, the first of them the plane's first coordinate. Pair by pair, what it must
# do:
#
# (a) **Turn, nothing else.** Each pair is turned about the origin: its length is kept, and the angle depends on
#     the position and the pair alone, never on the numbers in `x`.
# (b) **By the position times the pair's speed, counter-clockwise.** Position 0 turns nothing; position $p$ turns
#     pair $i$ by $p\,\omega_i$, from the pair's first axis towards its second. That is the opposite sense to the
#     table's $R$: either sense would do for attention, and we follow the RoPE paper (and the package).
# (c) **The table's speeds, for width $h$.** The $\omega_i$ are the table's (its property 3) for a table $h$ wide.
#
# Compute in `x`'s dtype (float32 in the model, float64 in the checks): the model is compared with the package's
# in float64 at the end of this notebook, and float32 angles would show there. The check measures each pair's angle before and after, as the table's check did.


# %%
def rotate_pairs(x, positions):
    """x (..., T, h), h even; positions (T,) integers -> the same shape, in x's dtype: pair i of row t turned
    counter-clockwise by positions[t] * w_i (the table's speeds for width h), computed in x's dtype."""
    # BEGIN SOLUTION
    h = x.size(-1)
    speeds = torch.exp(torch.arange(0, h, 2, dtype=x.dtype) * (-math.log(10000.0) / h))  # (h/2,): the w_i
    angle = positions.to(x.dtype)[:, None] * speeds  # (T, h/2): each pair's angle in each row
    cos, sin = angle.cos(), angle.sin()
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, h/2) each: the two coordinates of every pair
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # pairs back in place
    # END SOLUTION


print(rotate_pairs(torch.tensor([[1.0, 0.0, 1.0, 0.0]] * 3), torch.arange(3)))


# %% tags=["check"]
def rotation_cases(seed):
    """(x, positions): x (2, 3, T, h) at positions 0, 1 and drawn ones, for two fixed widths and one drawn from `seed`;
    then the same widths further along, at s, s + 1, ... from a drawn s in the hundreds, as in decoding."""
    g = torch.Generator().manual_seed(seed)
    drawn = (int(torch.randint(3, 9, (1,), generator=g)), 2 * int(torch.randint(2, 17, (1,), generator=g)))
    cases = []
    for T, h in [(4, 4), (6, 16), drawn]:
        positions = torch.cat([torch.tensor([0, 1]), torch.randint(2, 120, (T - 2,), generator=g)])
        cases.append((torch.randn(2, 3, T, h, generator=g, dtype=torch.float64), positions))
    for T, h in [(3, 4), (1, 16), (5, drawn[1])]:
        start = int(torch.randint(120, 700, (1,), generator=g))
        cases.append((torch.randn(1, 2, T, h, generator=g, dtype=torch.float64), torch.arange(start, start + T)))
    return cases


def probe_rotation(rotate_fn, seed=0):
    """Runs your function on each case: the vectors it returns, and whether it left the ones it was given alone."""
    turned, kept = [], []
    for x, positions in rotation_cases(seed):
        given = x.clone()
        turned.append(rotate_fn(given, positions))
        kept.append(bool(torch.equal(given, x)))
    return {"turned": turned, "kept": kept}


# %% tags=["check"]
def verify_rotation(values, seed=0):
    """Pair by pair: lengths kept, one angle per position and pair, position 0 still, then the speeds read off
    position 1 (the table's property 3) and every angle p * w_i, near the start and further along."""
    turned, kept, speeds = values["turned"], values["kept"], {}
    assert len(turned) == len(rotation_cases(seed)), f"expected {len(rotation_cases(seed))} results"
    assert len(kept) == len(turned), (
        f"the check recorded whether rotate_pairs left its input alone {len(kept)} times, for {len(turned)} calls"
    )
    assert all(k is True for k in kept), (
        "rotate_pairs changed the vectors it was given: return new ones (in attention they are a view of the layer's "
        "output, which autograd does not let you change in place)"
    )
    for (x, positions), y in zip(rotation_cases(seed), turned):
        T, h = x.shape[-2:]
        assert tuple(y.shape) == tuple(x.shape), f"rotate_pairs returned {tuple(y.shape)} for x {tuple(x.shape)}"
        y = y.double()
        (a, b), (c, d) = (x[..., 0::2], x[..., 1::2]), (y[..., 0::2], y[..., 1::2])  # each pair's coordinates
        assert probes.close(c**2 + d**2, a**2 + b**2, atol=1e-4), (
            f"(a): a pair (channels 2i, 2i+1) must keep its length (width h = {h}); pair the neighbours, and turn"
        )
        turn = torch.atan2(a * d - b * c, a * c + b * d)  # (2, 3, T, h/2): counter-clockwise angle, x to y
        same = torch.cos(turn - turn[:1, :1])  # 1 wherever every vector's pair turned by the same angle
        assert probes.close(same, torch.ones_like(same), atol=1e-4), (
            "(a): the angle must depend on the position and the pair alone, the same for every vector"
        )
        if positions[0] > 0:  # further along: the speeds were read off this width's first case
            w = speeds[h]
        else:
            w = speeds[h] = turn[0, 0, 1]  # (h/2,): each pair's turn at position 1, its speed
            assert probes.close(turn[..., 0, :], torch.zeros_like(turn[..., 0, :]), atol=1e-5), (
                "(b): position 0 must turn nothing"
            )
        assert abs(w[0].item() - 1.0) < 1e-4, (
            f"(b) and (c): pair 0 at position 1 should turn by +1 radian (counter-clockwise), it turns by {w[0].item():.4f}"
        )
        factor = w[1:] / w[:-1]
        assert probes.close(factor, factor.mean().expand_as(factor), rtol=1e-4), (
            f"(c): each pair should be slower than the one before by one factor (width {h}); the factors are {factor}"
        )
        slowdown = (1.0 / factor.mean()) ** (h // 2)
        assert abs(slowdown.item() / 10000 - 1) < 1e-3, (
            f"(c): the factor applied h/2 = {h // 2} times slows a pair {slowdown.item():.2f} times, not 10000"
        )
        # (T, h/2): how far each angle is from p * w_i, modulo a whole turn, in (-pi, pi]
        off = turn[0, 0] - positions.double()[:, None] * w
        off = torch.atan2(off.sin(), off.cos())
        assert off.abs().max() < 1e-3, (
            "(b): position p must turn pair i by p times its speed (positions are the numbers given, counted from 0)"
        )
        assert off.abs().max() < 1e-9, (
            f"(b): the angles are {off.abs().max():.1e} radians off p * w_i: for float64 vectors compute them in "
            "float64 (x's dtype), or the float64 comparison with the package at the end of the notebook fails"
        )


verify_rotation(probe_rotation(rotate_pairs))
print("✓ rotate_pairs turns each pair by its position times its speed")

# %% [markdown]
# ## Exercise 2.2 · Scaled dot-product attention, one head (3 points)
#
# Each position asks a question (its **query** $q$), each position offers a **key** $k$ and a **value** $v$.
# The answer is a weighted average of values, weighted by how well query and key match:
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(c\,QK^\top + M\right)V$$
#
# Three details matter, and the check below tests each:
#
# * each query's weights sum to 1 over the keys;
# * the scores are multiplied by the factor $c$ you derived in Question 1.9 of notebook 01 (Exercise 1.11's
#   `score_scale`), for query and key entries of variance 1; $d_k$, the last dimension of `q`, is their length;
# * the mask $M$ (0 where allowed, $-\infty$ where not) is applied **before** the softmax. Masking after it
#   would leave rows that no longer sum to 1. We pass the mask as booleans, `True` = may attend.


# %%
def attention(q, k, v, mask=None):
    """q (..., T, d_k), k (..., S, d_k), v (..., S, d_v), mask bool broadcastable to (..., T, S).

    Returns the output (..., T, d_v) and the weights (..., T, S).
    """
    # BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # forbidden keys get weight exp(-inf) = 0
    weights = scores.softmax(dim=-1)  # over keys: each row sums to 1
    return weights @ v, weights  # (..., T, d_v), (..., T, S)
    # END SOLUTION


# a small example you can follow by hand: 3 positions, d_k = 2
q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
out, w = attention(q, k, v)
print("weights\n", w, "\noutput\n", out)


# %% tags=["check"]
# the reference: check_inputs.attention_by_loops, plain Python one query at a time
from helpers.course import check_inputs


def attention_inputs(seed):
    """q, k, v (B, T, d_k) and a boolean mask (B, T, T) drawn from `seed`; every query may see at least itself."""
    g = torch.Generator().manual_seed(seed)
    B, T, d_k = 2, 5, 4
    q, k, v = (torch.randn(B, T, d_k, generator=g) * 2 for _ in range(3))
    mask = torch.rand(B, T, T, generator=g) > 0.4
    return q, k, v, mask | torch.eye(T, dtype=torch.bool)


def probe_attention(attention_fn, seed=1):
    """Runs your function on inputs drawn from `seed`: its output and weights."""
    out, weights = attention_fn(*attention_inputs(seed))
    return {"out": out, "weights": weights}


def verify_attention(values, seed=1):
    """The output and weights against the loop-by-loop reference, on the same inputs."""
    q, k, v, mask = attention_inputs(seed)
    (B, T, d_k), (out, weights) = q.shape, (values["out"], values["weights"])
    assert tuple(out.shape) == (B, T, d_k) and tuple(weights.shape) == (B, T, T), (
        "output (B, T, d_v), weights (B, T, S)"
    )
    assert probes.close(weights.sum(-1), torch.ones(B, T), atol=1e-5), (
        "each query's weights over the keys should sum to 1"
    )
    for b in range(B):
        ref_out, ref_w = check_inputs.attention_by_loops(q[b].tolist(), k[b].tolist(), v[b].tolist(), mask[b].tolist())
        assert probes.close(weights[b], torch.tensor(ref_w), atol=1e-5), (
            "weights differ from the loop-by-loop reference"
        )
        assert probes.close(out[b], torch.tensor(ref_out), atol=1e-5), "output differs from the loop-by-loop reference"


verify_attention(probe_attention(attention))
print("✓ attention matches a loop-by-loop reference")

# %% [markdown]
# PyTorch ships the same computation as one fused call, `F.scaled_dot_product_attention`; on a GPU it
# runs a kernel that never stores the full (T, S) weight matrix. Same boolean mask convention, same
# result. `helpers.nn.model` uses it; in this notebook we keep our own version so the weights stay visible.

# %%
g = torch.Generator().manual_seed(2)
q4, k4, v4 = (torch.randn(2, 3, 6, 8, generator=g) for _ in range(3))  # (B, heads, T, d_k)
m4 = (torch.rand(6, 6, generator=g) > 0.4) | torch.eye(6, dtype=torch.bool)  # any mask; each query sees itself
ours, _ = attention(q4, k4, v4, m4)
fused = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=m4)
print("largest difference:", (ours - fused).abs().max().item())

# %% tags=["check"]
assert probes.close(ours, fused, atol=1e-5), "our attention and F.scaled_dot_product_attention should agree"
print("✓ same result as F.scaled_dot_product_attention")

# %% [markdown]
# ## Exercise 2.3 · Multi-head attention (3 points)
#
# One head computes one weighted average per position. Several smaller heads can look for different
# things at once (one the previous word, another the matching noun). We project the input to queries,
# keys and values with one `Linear` of width 3·`d_model`, **split** each into `n_head` heads of size
# `hs = d_model / n_head`, attend in every head independently, **merge** the heads back side by side
# (head 0's numbers first) and mix them with an output projection.
#
# Shapes: `(B, T, C)` → split → `(B, nh, T, hs)` → attention per head → merge → `(B, T, C)`.
# The `Linear`'s output holds all the queries, then all the keys, then all the values (`d_model` numbers each),
# and within each, head 0's `hs` numbers first, then head 1's, and so on; merging puts them back in that order.
# The classic bug is a merge whose shapes fit but that interleaves positions and heads: the check catches it.
#
# With `rotary=True` (rotary positions, Exercise 2.1) the layer also turns every head's queries and keys by their
# positions 0, 1, …, T − 1 with your `rotate_pairs`, before the scores; the values are left as they are.


# %%
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, rotary=False):
        super().__init__()
        self.n_head, self.rotary = n_head, rotary
        self.qkv = nn.Linear(d_model, 3 * d_model)  # queries, keys and values of every head in one matmul
        self.proj = nn.Linear(d_model, d_model)  # mixes what the heads found

    def split_heads(self, t):  # (B, T, C) -> (B, nh, T, hs)
        # BEGIN SOLUTION
        B, T, C = t.shape
        return t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        # END SOLUTION

    def merge_heads(self, t):  # (B, nh, T, hs) -> (B, T, C), head 0's dimensions first
        # BEGIN SOLUTION
        B, nh, T, hs = t.shape
        return t.transpose(1, 2).reshape(B, T, nh * hs)
        # END SOLUTION

    def forward(self, x, mask=None):
        """Project to q, k, v, split into heads, (rotary: turn q and k), attend (keep the weights in
        self.last_weights), merge, project."""
        # BEGIN SOLUTION
        q, k, v = (self.split_heads(t) for t in self.qkv(x).chunk(3, dim=-1))
        if self.rotary:  # each query and key turned by its position; values carry content only
            positions = torch.arange(x.size(1))
            q, k = rotate_pairs(q, positions), rotate_pairs(k, positions)
        y, self.last_weights = attention(q, k, v, mask)  # kept for plotting
        return self.proj(self.merge_heads(y))
        # END SOLUTION


mha = MultiHeadAttention(D_MODEL, N_HEAD, rotary=POSITIONAL == "rotary")
print(tuple(x.shape), "->", tuple(mha(x).shape), "| weights per head:", tuple(mha.last_weights.shape))


# %% tags=["check"]
from helpers.nn.model import SelfAttention  # the package's layer: the rotary check's reference


def drawn_weights(shapes, seed, scale=0.5):
    """{name: tensor} drawn from `seed`, one per (name, shape) in order: the weights a check loads into your layer,
    so that the layer it tests cannot agree with itself by choosing its own (a zeroed projection, say)."""
    g = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=g) * scale for name, shape in shapes}


def some_mask(T, seed):
    """(T, T) bool drawn from `seed`: any pattern, each query seeing at least itself."""
    return (torch.rand(T, T, generator=torch.Generator().manual_seed(seed + 2)) > 0.4) | torch.eye(T, dtype=torch.bool)


def mha_weights(C, seed):
    shapes = [("qkv.weight", (3 * C, C)), ("qkv.bias", (3 * C,)), ("proj.weight", (C, C)), ("proj.bias", (C,))]
    return drawn_weights(shapes, seed)


def probe_multi_head(mha_cls, seed=3, rotary=False):
    """Runs your class: a layer (C = 12, 3 heads) holding weights drawn from `seed`, on an input drawn from it."""
    B, T, C, nh = 2, 5, 12, 3  # T is not the head size (4): positions taken from the wrong axis show
    layer = mha_cls(C, nh, rotary) if rotary else mha_cls(C, nh)
    layer.load_state_dict(mha_weights(C, seed))  # strict: the layer keeps the qkv and proj it was given
    x = torch.randn(B, T, C, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        return {"out": layer(x, some_mask(T, seed))}


def probe_multi_head_rotary(mha_cls, seed=3):
    """The same with rotary=True (verify_multi_head_rotary judges it as rotary, whatever the values say)."""
    return probe_multi_head(mha_cls, seed, rotary=True)


# %% tags=["check"]
from helpers.course import check_inputs  # noqa: F811 (each check cell imports what it uses: the loop reference)


def multi_head_by_hand(x, weights, nh, mask):
    """(T, C) -> (T, C), head by head with the loop reference: each head attends on its own slice of q, k, v."""
    C = x.size(-1)
    hs, W, b = C // nh, weights["qkv.weight"], weights["qkv.bias"]  # rows: all queries, then keys, then values
    heads = []
    for h in range(nh):
        cols = [part * C + h * hs + i for part in range(3) for i in range(hs)]
        qh, kh, vh = (x @ W[cols].T + b[cols]).split(hs, dim=-1)
        heads.append(
            torch.tensor(check_inputs.attention_by_loops(qh.tolist(), kh.tolist(), vh.tolist(), mask.tolist())[0])
        )
    return torch.cat(heads, dim=-1) @ weights["proj.weight"].T + weights["proj.bias"]  # heads side by side, in order


def verify_multi_head(values, seed=3, rotary=False):
    """Rebuild the output head by head from the weights the probe loaded, with the loop reference for attention;
    with rotary positions, against the package's layer holding the same weights."""
    B, T, C, nh = 2, 5, 12, 3
    x = torch.randn(B, T, C, generator=torch.Generator().manual_seed(seed + 1))
    mask, out = some_mask(T, seed), values["out"]
    assert tuple(out.shape) == (B, T, C), f"expected the output (B, T, C) = {(B, T, C)}, got {tuple(out.shape)}"
    if rotary:
        cfg = ModelConfig(vocab_size=2, max_len=T, n_layer=1, n_head=nh, d_model=C, positional="rotary",
                          attention_kernel="explicit")  # fmt: skip
        reference = SelfAttention(cfg)
        reference.load_state_dict(mha_weights(C, seed))
        with torch.no_grad():
            expected = reference(x, mask)
        assert probes.close(out, expected, atol=1e-5), (
            "with rotary=True the output differs from multi-head attention whose queries and keys are turned by "
            "rotate_pairs at positions 0 .. T-1 (and only those: the values are not turned)"
        )
        return
    for r in range(B):
        expected = multi_head_by_hand(x[r], mha_weights(C, seed), nh, mask)
        assert probes.close(out[r], expected, atol=1e-5), (
            "multi-head output differs from the head-by-head reference (each head attending on its own slice, "
            "the heads' outputs side by side in order, then the output projection)"
        )


def verify_multi_head_rotary(values, seed=3):
    verify_multi_head(values, seed, rotary=True)


verify_multi_head(probe_multi_head(MultiHeadAttention))
verify_multi_head_rotary(probe_multi_head_rotary(MultiHeadAttention))
print("✓ multi-head attention matches a head-by-head reference, and the package's with rotary positions")

# %% [markdown]
# ## Exercise 2.4 · The causal mask (1 point)
#
# A language model predicts token $t+1$ from tokens $\le t$. If position $t$ could attend to later
# positions, training would be trivial (copy the answer) and useless at generation time, where later
# tokens do not exist yet. Build the **causal** mask from that: which keys may each query see? The check
# asks the mask entry by entry and in use (changing a later input must leave every earlier output alone).


# %%
def causal_mask(T):
    """(T, T) bool: True where query i may see key j."""
    # BEGIN SOLUTION
    return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T): True on and below the diagonal
    # END SOLUTION


print(causal_mask(5).int())


# %% tags=["check"]
from helpers.course import check_inputs  # noqa: F811 (each check cell imports what it uses)


def mask_sizes(seed):
    return [*range(1, 7), int(torch.randint(7, 13, (1,), generator=torch.Generator().manual_seed(seed)))]


def probe_causal_mask(mask_fn, seed=4):
    """Runs your function: the masks it makes for T = 1 .. 6 and one more T drawn from `seed`."""
    return [mask_fn(T) for T in mask_sizes(seed)]


def verify_causal_mask(masks, seed=4):
    """Entry by entry, then in use: with the T = 6 mask, changing a later input leaves earlier outputs alone."""
    assert len(masks) == len(mask_sizes(seed)), f"expected {len(mask_sizes(seed))} masks"
    for T, m in zip(mask_sizes(seed), masks):
        assert m.dtype == torch.bool and tuple(m.shape[-2:]) == (T, T), "a (T, T) boolean mask, True = may attend"
        check_inputs.check_mask_entries(m, T)  # entry by entry, the first wrong one named
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 6, 8, generator=g).unbind(0)  # (T, d) each
    k2, v2 = k.clone(), v.clone()
    k2[4], v2[4] = torch.randn(8, generator=g), torch.randn(8, generator=g)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=masks[5])
    b = F.scaled_dot_product_attention(q, k2, v2, attn_mask=masks[5])
    assert probes.close(a[:4], b[:4]), (
        "positions 0-3 changed when only position 4 did: the mask lets them see the future"
    )


verify_causal_mask(probe_causal_mask(causal_mask))
print("✓ causal mask")

# %% [markdown]
# ## Exercise 2.5 · The prefix-LM mask (2 points)
#
# For translation the source is given in full before we write a single English word, so there is no
# reason to hide later French words from earlier ones. The **prefix-LM** mask lets every position see
# the whole prefix `<bos> French <sep>` (in both directions), and target positions see earlier target
# positions causally. Work out from that which keys each query may see.
#
# It depends on each row's `prefix_len`, so it has shape `(B, 1, T, T)`; the 1 broadcasts over heads.


# %%
def prefix_lm_mask(T, prefix_len):
    """(B, 1, T, T) bool: the prefix-LM mask of each row, True = may attend."""
    # BEGIN SOLUTION
    in_prefix = torch.arange(T)[None, :] < prefix_len[:, None]  # (B, T): which keys are source tokens
    return (causal_mask(T)[None] | in_prefix[:, None, :])[:, None]
    # END SOLUTION


print(prefix_lm_mask(7, torch.tensor([4]))[0, 0].int())


# %% tags=["check"]
def prefix_cases(seed):
    """(T, prefix lengths) for the check: the fixed case and one drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    T = int(torch.randint(4, 10, (1,), generator=g))
    return [(6, [1, 3, 6]), (T, torch.randint(1, T + 1, (4,), generator=g).tolist())]


def probe_prefix_lm_mask(mask_fn, seed=5):
    """Runs your function on each case: the masks it makes."""
    return [mask_fn(T, torch.tensor(lengths)) for T, lengths in prefix_cases(seed)]


def verify_prefix_lm_mask(masks, seed=5):
    assert len(masks) == len(prefix_cases(seed)), f"expected {len(prefix_cases(seed))} masks"
    for (T, lengths), m in zip(prefix_cases(seed), masks):
        B = len(lengths)
        assert m.dtype == torch.bool and tuple(m.shape) == (B, 1, T, T), f"shape (B, 1, T, T) = {(B, 1, T, T)}, boolean"
        check_inputs.check_mask_entries(m[:, 0], T, lengths)  # each row entry by entry, against its prefix length


verify_prefix_lm_mask(probe_prefix_lm_mask(prefix_lm_mask))
print("✓ prefix-LM mask")

# %% [markdown]
# **Which positions can each position see?** On the left the plain causal mask, on the right the
# prefix-LM mask, for our first sentence (rows are queries, columns keys; dark = may attend). What
# `prefix_len` opens is a set of *keys*, the source's: opening the source's *queries* instead would let source
# positions read the target, which leaks the answer.

# %%
seq, plen = encode_pair(*PAIRS[0])
labels_txt = [vocab[t] for t in seq]
fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
for ax, (title, m) in zip(
    axes,
    [
        ("causal", causal_mask(len(seq))),
        (f"prefix-LM (prefix = {plen})", prefix_lm_mask(len(seq), torch.tensor([plen]))[0, 0]),
    ],
):
    ax.imshow(m.int().numpy(), cmap="Greys", vmin=0, vmax=1.4)
    ax.set_xticks(range(len(seq)), labels_txt, rotation=90)
    ax.set_yticks(range(len(seq)), labels_txt)
    ax.axhline(plen - 0.5, color="tab:red", lw=1)
    ax.axvline(plen - 0.5, color="tab:red", lw=1)
    ax.set_title(title)
    ax.set_xlabel("key (attended to)")
axes[0].set_ylabel("query (attending)")
fig.suptitle("Which positions can each position see?")
fig.tight_layout()
save_figure(
    fig,
    "02_masks",
    question="Which positions can each position see, with the causal and with the prefix-LM mask?",
    caption=f"Attention masks for '{PAIRS[0][0]} → {PAIRS[0][1]}' (rows: queries, columns: keys; dark: may attend). "
    "The red lines end the prefix <bos> French <sep>; the prefix-LM mask opens the source block in both directions.",
    numbers={"sequence length": len(seq), "prefix length": plen},
)
plt.show()

# %% [markdown]
# **Why not a causal mask over the whole sequence?** Look at the column of `noir` ("black"). Under the
# causal mask only `noir` itself and later positions can read it; `chat` ("cat") cannot, at any layer.
# The vector for `chat` is built without knowing the cat is black. French puts the adjective after the
# noun, so the source words that come first are exactly those that need later words to be understood.
# A causal model can still get there (the `<sep>` position and target positions see everything), but
# it must route all such combinations through later positions. The prefix-LM mask lets every source
# word see the whole sentence, like the encoder of an encoder–decoder Transformer, at no extra cost.

# %%
col = seq.index(stoi["noir"])
for name, m in [("causal", causal_mask(len(seq))), ("prefix-LM", prefix_lm_mask(len(seq), torch.tensor([plen]))[0, 0])]:
    readers = [labels_txt[i] for i in range(plen) if m[i, col]]
    print(f"{name:>9}: source positions that can read 'noir': {readers}")

# %% [markdown]
# ## Exercise 2.6 · Feed-forward network (1 point)
#
# Attention moves information between positions; the feed-forward network then transforms each
# position on its own: widen to `d_ff` (4 × `d_model`), apply a non-linearity, project back. The same
# weights are used at every position.
#
# The non-linearity here is **ReLU²**, ReLU squared (So et al., 2021: the function ReLU gives, squared). Like ReLU
# it is zero for every negative input, but it has no kink at 0, so it bends smoothly, like GELU (GPT-2's choice). Primer (So et al., 2021) found it by
# search, the GPT-2 speed records and nanochat use it, and on our French–English development set it beat
# GELU (notebook 05, section 9 shows the switch).


# %%
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.fc = nn.Linear(d_model, d_ff)
        self.proj = nn.Linear(d_ff, d_model)

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        return self.proj(F.relu(self.fc(x)).square())  # SOLUTION


print(tuple(FeedForward(D_MODEL, 4 * D_MODEL)(x).shape))


# %% tags=["check"]
def ffn_weights(C, d_ff, seed):
    shapes = [("fc.weight", (d_ff, C)), ("fc.bias", (d_ff,)), ("proj.weight", (C, d_ff)), ("proj.bias", (C,))]
    return drawn_weights(shapes, seed)


def probe_feed_forward(ffn_cls, seed=6):
    """Runs your class: a network (C = 4, d_ff = 8) holding weights drawn from `seed`, on an input drawn from it."""
    ffn = ffn_cls(4, 8)
    ffn.load_state_dict(ffn_weights(4, 8, seed))
    with torch.no_grad():
        return ffn(torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(seed + 1)))


def feed_forward_by_hand(x, weights):
    """One position (C,) -> (C,), with ReLU² written from its definition: max(z, 0) squared."""
    hidden = [max(z, 0.0) ** 2 for z in (weights["fc.weight"] @ x + weights["fc.bias"]).tolist()]
    return weights["proj.weight"] @ torch.tensor(hidden) + weights["proj.bias"]


def verify_feed_forward(out, seed=6):
    """Position by position, against the definition."""
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(seed + 1))
    assert tuple(out.shape) == (2, 3, 4), f"expected (B, T, C) = (2, 3, 4), got {tuple(out.shape)}"
    for b in range(2):
        for t in range(3):
            expected = feed_forward_by_hand(x[b, t], ffn_weights(4, 8, seed))
            assert probes.close(out[b, t], expected, atol=1e-5), f"differs from the reference at row {b}, position {t}"


verify_feed_forward(probe_feed_forward(FeedForward))
print("✓ feed-forward network")

# %% [markdown]
# ## Exercise 2.7 · The residual block, with LayerNorm first (pre-LN) (2 points)
#
# A block runs attention (which moves information between positions) and then the feed-forward network
# (which transforms each position on its own). Both work on a running vector per position, the
# **residual stream**, and each has its own LayerNorm: `ln1` belongs to attention, `ln2` to the
# feed-forward. The arrangement GPT-2 uses, *pre-LN*, is defined by what it guarantees:
#
# 1. **The stream is never normalised or rescaled inside a block.** What leaves the block is exactly what
#    came in plus what the two sub-layers returned. So a block whose sub-layers return zero is the identity,
#    and the gradient reaches earlier blocks through a plain sum, however deep the stack.
# 2. **Each sub-layer reads a normalised copy of the stream as it stands when that sub-layer runs**, made by
#    its own LayerNorm. The feed-forward therefore sees what attention contributed.
# 3. **Attention gets the mask**, so no position reads one it may not see.
#
# The 2017 original (post-LN) normalised the stream itself after each addition, which breaks guarantee 1;
# deep post-LN stacks need a learning-rate warm-up to train at all. Write `forward` so that all three
# guarantees hold. The check watches what each sub-layer receives and returns.


# %%
class Block(nn.Module):
    def __init__(self, d_model, n_head, d_ff, rotary=False):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_head, rotary)
        self.ln2 = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)

    def forward(self, x, mask=None):
        """x (B, T, C) -> (B, T, C): attention, then the feed-forward, with the three guarantees above."""
        # BEGIN SOLUTION
        x = x + self.attn(self.ln1(x), mask)  # look around, add what was found
        return x + self.ffn(self.ln2(x))  # think per position, add that too
        # END SOLUTION


print(tuple(Block(D_MODEL, N_HEAD, 4 * D_MODEL)(x, causal_mask(x.size(1))).shape))


# %% tags=["check"]
from helpers.nn.model import build_attention_mask as package_mask  # the checks' causal mask, not spelt out here


def block_weights(C, d_ff, seed):
    """The block's weights drawn from `seed`: LayerNorm scales near 1 and shifts near 0 but not equal to them, so a
    misplaced LayerNorm shows."""
    g = torch.Generator().manual_seed(seed)
    weights = {f"attn.{k}": v for k, v in mha_weights(C, seed + 1).items()}
    weights.update({f"ffn.{k}": v for k, v in ffn_weights(C, d_ff, seed + 2).items()})
    for ln in ("ln1", "ln2"):
        weights[f"{ln}.weight"] = 0.5 + torch.rand(C, generator=g)
        weights[f"{ln}.bias"] = torch.rand(C, generator=g) - 0.5
    return weights


def block_inputs(seed):
    """x (2, 5, 8), and the same with a new last token (not a shift: LayerNorm would remove that)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 8, generator=g) * 3 + 1
    later = x.clone()
    later[:, -1] = torch.randn(2, 8, generator=g) * 3
    return x, later


def probe_block(block_cls, seed=7):
    """Runs your class with weights drawn from `seed`, watching what attention and the feed-forward receive and
    return in one call; then with only the last position changed."""
    block = block_cls(8, 2, 16)
    block.load_state_dict(block_weights(8, 16, seed))
    seen = []  # (sub-layer, what it received, what it returned), in the order they ran

    def watch(name):
        def hook(module, args, kwargs, output):
            seen.append([name, args[0] if args else kwargs.get("x"), output])

        return hook

    x, later = block_inputs(seed)
    mask = package_mask(5)[0, 0]  # (5, 5): the package's causal mask
    hooks = [getattr(block, name).register_forward_hook(watch(name), with_kwargs=True) for name in ("attn", "ffn")]
    try:
        with torch.no_grad():
            out = block(x, mask)
    finally:
        for hook in hooks:
            hook.remove()
    with torch.no_grad():
        moved = block(later, mask)
    return {"out": out, "seen": seen, "later": moved}


# %% tags=["check"]
from helpers.course import check_inputs  # noqa: F811 (each check cell imports what it uses)
from helpers.nn.model import Block as PackageBlock  # the package's block: the second call's reference


def verify_block(values, seed=7):
    """Each guarantee on what the sub-layers received and returned; each sub-layer's output against its reference;
    the second call against the package's block holding the same weights."""
    x, later = block_inputs(seed)
    w = block_weights(8, 16, seed)
    out, seen = values["out"], values["seen"]
    assert tuple(out.shape) == (2, 5, 8), f"the block should return (B, T, C) = (2, 5, 8), got {tuple(out.shape)}"
    order = [name for name, _, _ in seen]
    assert order == ["attn", "ffn"], (
        f"expected self.attn(...) then self.ffn(...), each called once as a module; the calls were {order}"
    )
    (_, attn_in, attn_out), (_, ffn_in, ffn_out) = seen
    ln1, ln2 = ((w[f"{ln}.weight"], w[f"{ln}.bias"]) for ln in ("ln1", "ln2"))
    check_inputs.check_block_stream(x, out, attn_in, attn_out, ffn_in, ffn_out, ln1, ln2)  # guarantees 1 and 2
    attn_w = {k.removeprefix("attn."): v for k, v in w.items() if k.startswith("attn.")}
    causal = package_mask(5)[0, 0]
    for r in range(2):
        assert probes.close(attn_out[r], multi_head_by_hand(attn_in[r], attn_w, 2, causal), atol=1e-4), (
            "guarantee 3: what attention returned is not causal multi-head attention of what it received (is the mask "
            "passed on? does Exercise 2.3 pass?)"
        )
    ffn_w = {k.removeprefix("ffn."): v for k, v in w.items() if k.startswith("ffn.")}
    for r in range(2):
        for t in range(5):
            assert probes.close(ffn_out[r, t], feed_forward_by_hand(ffn_in[r, t], ffn_w), atol=1e-4), (
                "what the feed-forward returned is not the feed-forward network of what it received (does Exercise "
                "2.6 pass?)"
            )
    assert tuple(values["later"].shape) == (2, 5, 8), f"the second call returned {tuple(values['later'].shape)}"
    moved = (values["later"] - out)[:, :-1].abs().max().item()
    assert moved < 1e-5, f"guarantee 3: changing only the last position moved earlier outputs by {moved:.2e}"
    reference = PackageBlock(ModelConfig(vocab_size=2, max_len=5, n_layer=1, n_head=2, d_model=8, d_ff=16))
    reference.load_state_dict(w)
    with torch.no_grad():
        expected = reference(later, causal)
    assert probes.close(values["later"], expected, atol=1e-4), (
        "the block's output for a second input (only the last position changed) differs from the package's block "
        "holding the same weights"
    )


verify_block(probe_block(Block))
print("✓ pre-LN residual block: the three guarantees hold")

# %% [markdown]
# ## Exercise 2.8 · The whole model (3 points)
#
# Token embedding (times $\sqrt{d_\text{model}}$ with sinusoidal positions, as in Vaswani et al., so the
# table's unit-size numbers do not drown the small initial embeddings) plus positions (rotary ones are added
# nowhere: the blocks' attention turns q and k), `n_layer` blocks, a final LayerNorm, and a linear **LM head**
# that turns each vector into one score per vocabulary word.
#
# **Weight tying:** the head reuses the token-embedding matrix. A word's input vector and the vector
# that scores it as output are the same, which saves a whole matrix of parameters and tends to help
# small models. `forward` takes an optional `prefix_len`: with it the prefix-LM mask, without it the
# causal mask. Sizes come from `helpers.nn.model.ModelConfig`, the dataclass the package uses as well.


# %%
class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.positional == "learned":
            self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        elif cfg.positional == "sinusoidal":  # a fixed table: a buffer, not a parameter, and not saved
            self.register_buffer("pos_table", sinusoidal_positions(cfg.max_len, cfg.d_model), persistent=False)
        rotary = cfg.positional == "rotary"  # nothing to hold: the attention layers turn q and k
        self.blocks = nn.ModuleList(Block(cfg.d_model, cfg.n_head, cfg.d_ff, rotary) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        # BEGIN SOLUTION
        self.lm_head.weight = self.tok_emb.weight  # weight tying
        # END SOLUTION
        for m in self.modules():  # small initial weights (GPT-2): start near uniform predictions
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def embed(self, ids, start=0):  # (B, T) -> (B, T, C); positions start, start+1, ...
        # BEGIN SOLUTION
        pos = torch.arange(start, start + ids.size(1))
        if self.cfg.positional == "learned":
            return self.tok_emb(ids) + self.pos_emb(pos)
        if self.cfg.positional == "sinusoidal":
            return self.tok_emb(ids) * math.sqrt(self.cfg.d_model) + self.pos_table[pos]
        return self.tok_emb(ids)  # rotary: the positions enter inside attention
        # END SOLUTION

    def forward(self, ids, prefix_len=None):  # (B, T) -> logits (B, T, vocab)
        """The causal mask without prefix_len, the prefix-LM mask with it."""
        # BEGIN SOLUTION
        T = ids.size(1)
        mask = causal_mask(T) if prefix_len is None else prefix_lm_mask(T, prefix_len)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))
        # END SOLUTION


cfg = ModelConfig(
    vocab_size=len(vocab), max_len=MAX_LEN, n_layer=N_LAYER, n_head=N_HEAD, d_model=D_MODEL, positional=POSITIONAL
)
model = Transformer(cfg)
print(cfg)
print("logits", tuple(model(ids, prefix_len).shape))


# %% tags=["check"]
from helpers.nn.model import DecoderOnlyTransformer as PackageModel  # the package's model: the checks' reference
from helpers.nn.model import ModelConfig


def model_weights(cfg, seed):
    """A weight for every parameter of a model of `cfg`, drawn from `seed` (larger than the init, so every effect is
    visible), under the names the model uses; the LM head gets the token embedding's (tied)."""
    g = torch.Generator().manual_seed(seed)
    names = sorted(name for name in PackageModel(cfg).state_dict() if name != "lm_head.weight")
    shapes = dict(PackageModel(cfg).state_dict().items())
    weights = {name: torch.randn(shapes[name].shape, generator=g) * 0.3 for name in names}
    return {**weights, "lm_head.weight": weights["tok_emb.weight"]}


def model_cases(seed):
    """{case: (ids (1, 5), prefix_len or None)}: a sentence drawn from `seed` and the variations the check asks about."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randperm(16, generator=g)[:5] + 4).tolist()  # five different tokens
    swapped, later, changed = [x[1], x[0], *x[2:]], [*x[:4], 1], [*x[:3], 1, x[4]]
    return {
        "causal": (x, None),
        "later": (later, None),
        "everything": (x, 5),
        "everything swapped": (swapped, 5),
        "prefix": (x, 4),
        "prefix changed": (changed, 4),
    }


def probe_model(model_cls, seed=8, positional="learned"):
    """Runs your class: a small model with the `positional` positions, holding weights drawn from `seed`; its logits
    for each case, and its LM head after the token embedding is moved (a tied head moves with it)."""
    cfg = ModelConfig(vocab_size=20, max_len=8, n_layer=2, n_head=2, d_model=16, positional=positional)
    m = model_cls(cfg)
    m.load_state_dict(model_weights(cfg, seed))
    with torch.no_grad():
        m.tok_emb.weight.add_(1.0)
        head = m.lm_head.weight.clone()
        m.tok_emb.weight.sub_(1.0)
        logits = {
            case: m(torch.tensor([ids]), None if plen is None else torch.tensor([plen]))
            for case, (ids, plen) in model_cases(seed).items()
        }
    return {"head": head, "logits": logits}


def probe_model_learned(model_cls, seed=8):
    """probe_model with each kind of positions: verify_model_learned, _sinusoidal and _rotary judge them as such."""
    return probe_model(model_cls, seed, "learned")


def probe_model_sinusoidal(model_cls, seed=8):
    return probe_model(model_cls, seed, "sinusoidal")


def probe_model_rotary(model_cls, seed=8):
    return probe_model(model_cls, seed, "rotary")


# %% tags=["check"]
def verify_model(values, seed=8, positional="learned"):
    """Shapes, tying, what each position sees; then every case's logits against the package's model with the
    `positional` positions (the check's: each call's verify names its kind)."""
    cfg = ModelConfig(vocab_size=20, max_len=8, n_layer=2, n_head=2, d_model=16, positional=positional)
    weights, logits, cases = model_weights(cfg, seed), values["logits"], model_cases(seed)
    assert isinstance(logits, dict) and sorted(logits) == sorted(cases), f"expected the logits of {sorted(cases)}"
    for case, got in logits.items():
        assert tuple(got.shape) == (1, 5, 20), (
            f"case {case!r}: logits (B, T, vocab) = (1, 5, 20), got {tuple(got.shape)}"
        )
    head = values["head"]
    assert tuple(head.shape) == (20, 16), (
        f"the LM head's weight should be (vocab, d_model) = (20, 16), got {tuple(head.shape)}"
    )
    assert probes.close(head, weights["tok_emb.weight"] + 1.0), (
        "the LM head should share the token-embedding matrix (it did not move with it)"
    )
    # everything visible to everything (a prefix as long as the sequence): two orders of the same words
    assert not probes.close(logits["everything"][0, -1], logits["everything swapped"][0, -1], atol=1e-4), (
        "the last position gives the same output for two orders of the same words: the model must tell them apart"
    )
    assert probes.close(logits["causal"][0, :4], logits["later"][0, :4], atol=1e-5), (
        "changing the last token changed earlier logits (causal)"
    )
    assert not probes.close(logits["prefix"][0, 0], logits["prefix changed"][0, 0], atol=1e-4), (
        "with prefix_len, the first source position must see a later source token"
    )
    reference = PackageModel(cfg).eval()
    reference.load_state_dict(weights)
    with torch.no_grad():
        for case, (ids, plen) in cases.items():
            expected = reference(torch.tensor([ids]), None if plen is None else torch.tensor([plen]))
            assert probes.close(logits[case], expected, atol=1e-4), (
                f"case {case!r}, {positional} positions: the logits differ from the package's model holding "
                f"the same weights (largest difference {(logits[case] - expected).abs().max():.2e}; rotary: does "
                "every Block pass rotary on to its attention?)"
            )


def verify_model_learned(values, seed=8):
    verify_model(values, seed, "learned")


def verify_model_sinusoidal(values, seed=8):
    verify_model(values, seed, "sinusoidal")


def verify_model_rotary(values, seed=8):
    verify_model(values, seed, "rotary")


verify_model_learned(probe_model_learned(Transformer))
verify_model_sinusoidal(probe_model_sinusoidal(Transformer))
verify_model_rotary(probe_model_rotary(Transformer))
print("✓ model: shapes, tying, positions (learned, sinusoidal, rotary), masks")

# %% [markdown]
# The argument about `noir`, now measured in the model itself (still untrained: information flow does not
# need training). We change `noir` to `blanc` and ask which source positions' outputs change.

# %%
src_a = torch.tensor([encode_prefix("le chat noir dort")])
src_b = torch.tensor([encode_prefix("le chat blanc dort")])
with torch.no_grad():
    for name, pl in [("causal", None), ("prefix-LM", torch.tensor([src_a.size(1)]))]:
        change = (model(src_a, pl) - model(src_b, pl)).abs().amax(-1)[0]
        print(f"{name:>9}:", "  ".join(f"{vocab[t]} {c:.1e}" for t, c in zip(src_a[0].tolist(), change.tolist())))

# %% [markdown]
# ## Exercise 2.9 · How many parameters? (2 points)
#
# Counting by hand is a good test of understanding, and it is how model sizes are planned before anything
# is built. Derive the number of parameters of `Transformer(cfg)` as a formula in the sizes alone: the
# vocabulary $V$ (`cfg.vocab_size`), the width $C$ (`cfg.d_model`), the feed-forward width $F$ (`cfg.d_ff`),
# the number of blocks $L$ (`cfg.n_layer`), the longest sequence $P$ (`cfg.max_len`) and the kind of
# positions (`cfg.positional`).
#
# Go through the classes you wrote above (`MultiHeadAttention`, `FeedForward`, `Block`, `Transformer`)
# and, for every `nn.Linear`, `nn.Embedding` and `nn.LayerNorm` in them, work out which tensors it holds
# and their sizes (PyTorch's documentation of each class lists them). Watch for what is learned and what
# is fixed, for biases, and for a tensor that two modules share: it counts once. Does the number of heads
# matter? Your function must not build the model or any module: the check runs it on the sizes only, and
# compares it with the model's own count for several configurations.


# %%
def count_parameters(cfg):
    """The number of parameters of Transformer(cfg), from the sizes in cfg alone, building nothing."""
    # BEGIN SOLUTION
    V, C, F_, L = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layer
    per_block = (3 * C * C + 3 * C) + (C * C + C) + (C * F_ + F_ + F_ * C + C) + 2 * 2 * C
    positions = cfg.max_len * C if cfg.positional == "learned" else 0
    return V * C + positions + L * per_block + 2 * C
    # END SOLUTION


print(f"formula: {count_parameters(cfg):,}   counted: {sum(p.numel() for p in model.parameters()):,}")


# %% tags=["check"]
def count_without_building(count_fn, cfg):
    """count_fn(cfg), and whether it built a module while it ran (nn.Module.__init__ called)."""
    import sys

    built, init = [], nn.Module.__init__.__code__

    def watch(frame, event, arg):
        if event == "call" and frame.f_code is init:
            built.append(frame.f_code.co_name)

    before = sys.getprofile()
    sys.setprofile(watch)
    try:
        n = count_fn(cfg)
    finally:
        sys.setprofile(before)
    return n, bool(built)


def count_cases(seed):
    """Sizes varied one or two at a time, and one set drawn from `seed`."""
    base = dict(vocab_size=20, max_len=8, n_layer=2, n_head=2, d_model=16)
    variations = [
        dict(),
        dict(positional="sinusoidal"),
        dict(positional="rotary"),
        dict(d_ff=24, n_layer=3),
        dict(vocab_size=50, n_head=1),
        dict(d_model=8, max_len=5),
        dict(d_model=24, n_head=3, d_ff=40, n_layer=1, max_len=11),
        dict(d_model=12, n_head=4, vocab_size=7, positional="sinusoidal"),
        dict(vocab_size=1000, max_len=64, n_layer=4, n_head=4, d_model=64, d_ff=200),
    ]
    g = torch.Generator().manual_seed(seed)
    draw = [
        int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in [(1, 5), (2, 9), (5, 300), (4, 40), (1, 5), (8, 99)]
    ]
    heads, size, vocab_size, max_len, layers, d_ff = draw
    positional = ("learned", "sinusoidal", "rotary")[draw[2] % 3]
    drawn = dict(n_head=heads, d_model=2 * heads * size, vocab_size=vocab_size, max_len=max_len, n_layer=layers,
                 d_ff=d_ff, positional=positional)  # fmt: skip
    return [ModelConfig(**{**base, **kw}) for kw in [*variations, drawn]]


def probe_parameter_count(count_fn, seed=9):
    """Runs your function on each configuration: its count, and whether it built a module to get it."""
    return [list(count_without_building(count_fn, c)) for c in count_cases(seed)]


def verify_parameter_count(counts, seed=9):
    """Against the package model's own count (a shared tensor counted once)."""
    assert len(counts) == len(count_cases(seed)), f"expected {len(count_cases(seed))} counts"
    for c, (n, built) in zip(count_cases(seed), counts):
        actual = sum(p.numel() for p in PackageModel(c).parameters())  # a tied weight is counted once
        assert not built, "count_parameters built a module: the count must come from the sizes in cfg alone"
        assert n == actual, f"formula gives {n}, the model has {actual} parameters ({c})"


verify_parameter_count(probe_parameter_count(count_parameters))
print("✓ parameter formula")

# %% [markdown]
# ## Exercise 2.10 · Labels: shift by one, target tokens only (3 points)
#
# Position $t$ predicts token $t+1$, so the label at position $t$ is `ids[t+1]`: the labels are the
# inputs **shifted left by one**. Forgetting the shift trains the model to copy its input, which it
# learns perfectly and uselessly. Positions whose next token is still French get the label `-100`,
# which `F.cross_entropy` ignores; so do positions whose next token is padding. The first labelled
# position is `<sep>`, which predicts the first English word; the last predicts `<eos>`.


# %%
def make_labels(ids, prefix_len, pad_id=PAD):
    """(B, T) labels: the next token, or -100 where the next token is source or padding."""
    # BEGIN SOLUTION
    labels = torch.full_like(ids, -100)
    labels[:, :-1] = ids[:, 1:]  # position t predicts token t + 1
    next_pos = torch.arange(1, ids.size(1) + 1)  # index of the token each position predicts
    labels[next_pos[None, :] < prefix_len[:, None]] = -100  # that token is source: given, not predicted
    labels[labels == pad_id] = -100
    return labels
    # END SOLUTION


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


labels = make_labels(ids, prefix_len)
for t, (i, label) in enumerate(zip(ids[0].tolist(), labels[0].tolist())):
    print(f"position {t}: input {vocab[i]:>7} -> label {vocab[label] if label >= 0 else '(none)'}")


# %% tags=["check"]
def label_cases(specials, seed):
    """(ids, prefix lengths): the worked example, then a batch drawn from `seed` with padding in one row."""
    pad, bos, sep, eos = specials
    g = torch.Generator().manual_seed(seed)
    batch = torch.randint(4, 30, (3, 9), generator=g)
    batch[1, 7:] = pad
    return [
        (torch.tensor([[bos, 10, 11, sep, 20, 21, eos, pad]]), torch.tensor([4])),  # <bos> le chat <sep> the cat <eos>
        (batch, torch.tensor([2, int(torch.randint(3, 8, (1,), generator=g)), 9])),
    ]


def probe_labels(make_labels_fn, seed=10):
    """Runs your function on each case: the labels it makes."""
    specials = [PAD, BOS, SEP, EOS]
    return {
        "specials": specials,
        "labels": [make_labels_fn(ids, plen, PAD) for ids, plen in label_cases(specials, seed)],
    }


def verify_labels(values, seed=10):
    """The worked example by hand, then the batch by loops."""
    specials, labels = [PAD, BOS, SEP, EOS], values["labels"]  # the check's own: not the kernel's word
    pad, eos = specials[0], specials[3]
    (_, _), (ids, plen) = label_cases(specials, seed)
    got = labels[0].tolist()[0]
    assert got == [-100, -100, -100, 20, 21, eos, -100, -100], (
        f"got {got} for the worked example (prefix of 4, one <pad> at the end)"
    )
    got = labels[1]
    assert tuple(got.shape) == tuple(ids.shape), f"labels {tuple(got.shape)} for ids {tuple(ids.shape)}"
    for b in range(ids.size(0)):
        for t in range(ids.size(1)):
            nxt = ids[b, t + 1].item() if t + 1 < ids.size(1) else None
            want = nxt if nxt is not None and t + 1 >= plen[b] and nxt != pad else -100
            assert got[b, t].item() == want, f"row {b} position {t}: label {got[b, t].item()}, expected {want}"


verify_labels(probe_labels(make_labels))
print("✓ labels")

# %% [markdown]
# ## One training loop: overfit six sentences
#
# The smallest honest test of a model is whether it can memorise a tiny batch. If the loss does not
# go to nearly zero, something is broken (a mask that hides the source, unshifted labels, no gradient
# reaching a layer). Forward, loss, `zero_grad`, `backward`, `step`, repeated.

# %%
runtime.set_seed(SEED)
model = Transformer(cfg)
optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
losses = []
for step in range(TRAIN_STEPS):
    loss = lm_loss(model(ids, prefix_len), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    if step % 50 == 0 or step == TRAIN_STEPS - 1:
        print(f"step {step:4d}  loss {loss.item():.4f}")

# %% [markdown]
# **Does the loss reach (nearly) zero?** It should start near $\ln V$ (uniform guessing over the
# vocabulary) and fall to almost nothing.

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.2))
ax.semilogy(losses)
ax.axhline(math.log(len(vocab)), color="grey", ls="--", label=f"ln V = {math.log(len(vocab)):.2f} (uniform guess)")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy per target token (nats)")
ax.set_title(f"Overfitting {len(PAIRS)} sentence pairs: loss per step")
ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "02_overfit_loss",
    question="Can the model memorise six sentence pairs?",
    caption=f"Training loss on the {len(PAIRS)} pairs (log scale) over {TRAIN_STEPS} AdamW steps; the dashed line "
    "is ln V, the loss of a uniform guess over the vocabulary.",
    numbers={"first loss": losses[0], "last loss": losses[-1], "steps": TRAIN_STEPS},
)
plt.show()


# %% tags=["check"]
def check_overfit(losses):
    assert losses[0] > 1.5, f"the first loss {losses[0]:.2f} is already low: are the labels leaking into the inputs?"
    assert losses[-1] < 0.05 and losses[-1] < losses[0] / 20, (
        f"the loss only fell from {losses[0]:.3f} to {losses[-1]:.3f}: the model cannot memorise six sentences"
    )


check_overfit(losses)
print("✓ the model memorised the batch")

# %% [markdown]
# **Where does each position look?** Attention weights of the trained model for the first sentence,
# every layer and head (rows: queries, columns: keys). The mask's shape is plain: source rows spread over
# the source only, and no row looks to its right in the target. Remember that a row predicts the *next*
# token: the row of `black` must produce `cat`, and some heads there look at `chat`. With six training
# sentences, do not read much more into *which* word a head picked.

# %%
with torch.no_grad():
    model(ids[:1], prefix_len[:1])
n = len(seq)
fig, axes = plt.subplots(
    N_LAYER, N_HEAD, figsize=(3.4 * N_HEAD + 1, 3.6 * N_LAYER + 0.6), squeeze=False, layout="constrained"
)
for layer, block in enumerate(model.blocks):
    for h in range(N_HEAD):
        ax = axes[layer][h]
        image = ax.imshow(block.attn.last_weights[0, h, :n, :n].detach().numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(n), labels_txt, rotation=90, fontsize=8)
        ax.set_yticks(range(n), labels_txt, fontsize=8)
        ax.set_title(f"layer {layer}, head {h}", fontsize=10)
fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight (each row sums to 1)")
fig.suptitle(f"Attention weights of the trained model on '{PAIRS[0][0]}' (rows: queries, columns: keys)")
save_figure(
    fig,
    "02_attention_weights",
    question="Where does each position look, in every layer and head of the trained model?",
    caption=f"Attention weights of the model trained on {len(PAIRS)} pairs, for its first sentence; rows are queries "
    "(a row predicts the next token), columns keys. Source rows spread over the source only; no target row looks right.",
    numbers={"layers": N_LAYER, "heads": N_HEAD},
)
plt.show()

# %% [markdown]
# ## Exercise 2.11 · Generation with a key/value cache (3 points)
#
# To translate, feed the prefix, take the most likely next token (greedy decoding), append it, repeat
# until `<eos>`. Recomputing the whole sequence at each step repeats work: the keys and values of earlier
# positions never change, because a position's vector depends only on positions it may see, and no
# position may see a token generated after it. So we **cache** each layer's keys and values and,
# at each step, run only the new token: its query attends to the cached keys plus its own.
#
# `forward_cached` walks the same modules as `Transformer.forward`, and its logits for the new tokens are those
# `Transformer.forward` gives them over everything so far, the first call's tokens being the prefix (the check
# compares the two). The first call is given the whole prefix, each later call one token. The new tokens' positions
# continue from the number of tokens already cached. It cannot call `block.attn(...)`, which computes keys and
# values for the tokens it is given alone and keeps none; the layer's parts and your `attention` are yours to use.
# With rotary positions, decide what the cache holds (notebook 05 asks why your choice stays right as generation
# moves on).
#
# > **Aside.** The cache trades memory for time: per layer it holds two tensors of shape
# > (batch, heads, tokens so far, head size). For our sentences that is nothing; for long documents it
# > is what limits the batch size at generation time. `helpers.nn.model` also reorders it when beam search
# > keeps some hypotheses and drops others, and left-pads sentences of different lengths so one batch
# > can decode them together.


# %%
def forward_cached(model, new_ids, cache):
    """Logits for new_ids (B, T_new). cache: a list with one (k, v) per layer, each (B, nh, S, hs); grows in place."""
    # BEGIN SOLUTION
    start = cache[0][0].size(2) if cache else 0  # positions already cached
    positions = torch.arange(start, start + new_ids.size(1))  # the new tokens'
    x = model.embed(new_ids, start)
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        q, k, v = (attn.split_heads(t) for t in attn.qkv(block.ln1(x)).chunk(3, dim=-1))
        if attn.rotary:  # turned once, by their own positions: a cached key is never turned again
            q, k = rotate_pairs(q, positions), rotate_pairs(k, positions)
        if layer < len(cache):
            k, v = torch.cat([cache[layer][0], k], dim=2), torch.cat([cache[layer][1], v], dim=2)
            cache[layer] = (k, v)
        else:
            cache.append((k, v))
        y, _ = attention(q, k, v)
        x = x + attn.proj(attn.merge_heads(y))
        x = x + block.ffn(block.ln2(x))
    return model.lm_head(model.ln_f(x))
    # END SOLUTION


@torch.no_grad()
def greedy_translate(model, prefix, max_new_tokens, use_cache=True):
    model.eval()
    seq, cache, out = list(prefix), [], []
    new = list(prefix)  # tokens the cache has not seen: first the whole prefix, then one token per step
    for _ in range(max_new_tokens):
        if use_cache:
            logits = forward_cached(model, torch.tensor([new]), cache)
        else:  # the reference: recompute everything with the prefix-LM mask
            logits = model(torch.tensor([seq]), torch.tensor([len(prefix)]))
        token = int(logits[0, -1].argmax())
        if token == EOS:
            break
        out.append(token)
        seq.append(token)
        new = [token]
    return out


for fr, _ in PAIRS:
    words = [vocab[t] for t in greedy_translate(model, encode_prefix(fr), MAX_LEN - len(encode_prefix(fr)))]
    print(f"{fr:>22} -> {' '.join(words)}")


# %% tags=["check"]
from helpers.nn.model import LayerCache, build_attention_mask  # the package's cache and mask, for the reference

KV_VOCAB = 24  # the vocabulary size of the check's model, its own whatever the notebook's


def kv_config(positional):
    """The check's model: its own sizes, with the kind of positions each of its calls names."""
    return ModelConfig(vocab_size=KV_VOCAB, max_len=16, n_layer=2, n_head=4, d_model=32, positional=positional)


def kv_case(vocab_size, specials, seed):
    """A prefix <bos> ... <sep> and a continuation ending in <eos>, drawn from `seed`."""
    _, bos, sep, eos = specials
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(4, vocab_size, (int(torch.randint(2, 6, (1,), generator=g)) + 4,), generator=g).tolist()
    return [bos, *words[:-4], sep], [*words[-4:], eos]


def probe_kv_cache(forward_cached_fn, model_cls, seed=11, positional="rotary"):
    """Runs your function on a model of your class with the check's sizes and `positional` positions, holding weights
    drawn from `seed`: the logits of the prefix through the cache, then of each token one at a time; and the
    translations with and without the cache."""
    cfg = kv_config(positional)
    prefix, continuation = kv_case(cfg.vocab_size, [PAD, BOS, SEP, EOS], seed)
    model = model_cls(cfg)
    model.load_state_dict(model_weights(cfg, seed))
    cache = []
    with torch.no_grad():
        steps = [forward_cached_fn(model, torch.tensor([prefix]), cache)]
        steps += [forward_cached_fn(model, torch.tensor([[token]]), cache) for token in continuation]
    greedy = [greedy_translate(model, prefix, 8), greedy_translate(model, prefix, 8, use_cache=False)]
    return {"greedy": greedy, "steps": steps, "cache": [list(e) if isinstance(e, tuple | list) else [e] for e in cache]}


def probe_kv_cache_rotary(forward_cached_fn, model_cls, seed=11):
    """probe_kv_cache with each kind of positions: the cache must work for every kind, not only the notebook's
    (verify_kv_cache_rotary and _learned judge them as such)."""
    return probe_kv_cache(forward_cached_fn, model_cls, seed, "rotary")


def probe_kv_cache_learned(forward_cached_fn, model_cls, seed=12):
    return probe_kv_cache(forward_cached_fn, model_cls, seed, "learned")


# %% tags=["check"]
def verify_kv_cache(values, seed=11, positional="rotary"):
    """Each step through the cache against a full recomputation by the package's model with the `positional`
    positions (the check's: each call's verify names its kind) holding the same weights."""
    cfg = kv_config(positional)
    reference = PackageModel(cfg).eval()
    reference.load_state_dict(model_weights(cfg, seed))  # the weights and the special tokens are the check's own
    prefix, continuation = kv_case(cfg.vocab_size, [PAD, BOS, SEP, EOS], seed)
    steps, seq = values["steps"], list(prefix)
    assert len(steps) == 1 + len(continuation), f"expected {1 + len(continuation)} steps, got {len(steps)}"
    with torch.no_grad():
        full = reference(torch.tensor([seq]), torch.tensor([len(prefix)]))
        assert probes.close(steps[0], full, atol=1e-4), (
            f"prefix logits differ from the full forward pass ({positional} positions)"
        )
        for step, token in enumerate(continuation):
            seq.append(token)
            full = reference(torch.tensor([seq]), torch.tensor([len(prefix)]))[0, -1]
            assert probes.close(steps[step + 1][0, -1], full, atol=1e-4), (
                f"step {step}: cached logits drift from full recomputation (max diff "
                f"{(steps[step + 1][0, -1] - full).abs().max():.2e})"
            )
        # what the cache must hold at the end: every position's keys (turned, with rotary positions) and values
        held = [LayerCache() for _ in reference.blocks]
        x = reference.embed(torch.tensor([seq]), torch.arange(len(seq)))
        for block, layer in zip(reference.blocks, held):
            x = block(x, build_attention_mask(len(seq), torch.tensor([len(prefix)])), layer, torch.arange(len(seq)))
        expected = reference.generate([prefix], 8, eos_id=EOS)[0]
    cache = values["cache"]
    assert len(cache) == len(held), f"the cache holds {len(cache)} entries for {len(held)} layers: one (k, v) each"
    for n, (entry, want) in enumerate(zip(cache, held)):
        got = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in entry]
        assert got == [tuple(want.k.shape), tuple(want.v.shape)], (
            f"layer {n}'s cache entry is {got}: expected its keys and values, (1, nh, S, hs) each, S = {len(seq)}"
        )
        assert probes.close(entry[0], want.k, atol=1e-4) and probes.close(entry[1], want.v, atol=1e-4), (
            f"layer {n}'s cache holds other keys or values than the model computes for those positions (with "
            "rotary positions: each key turned once, by its own position)"
        )
    cached, recomputed = values["greedy"]
    assert cached == recomputed == expected, (
        f"greedy translations differ: with the cache {cached}, without {recomputed}, the package's {expected}"
    )


def verify_kv_cache_rotary(values, seed=11):
    verify_kv_cache(values, seed, "rotary")


def verify_kv_cache_learned(values, seed=12):
    verify_kv_cache(values, seed, "learned")


verify_kv_cache_rotary(probe_kv_cache_rotary(forward_cached, Transformer))
verify_kv_cache_learned(probe_kv_cache_learned(forward_cached, Transformer))
print("✓ the cache reproduces full recomputation (rotary positions, and learned ones)")

# %% [markdown]
# ## Defined once: the same model in `helpers.nn.model`
#
# From notebook 03 on we import the model instead of redefining it: `helpers.nn.model` holds
# `DecoderOnlyTransformer` and `ModelConfig`, and `helpers.nn.build_model(config)` builds it (or, in notebook 05, a
# research variant built on top of it). It is this notebook's model, written for speed and safety: one fused
# `F.scaled_dot_product_attention` call, dropout, clear errors for bad input, and batched greedy and beam search
# over sentences of different lengths with the cache. The fused kernel never forms the attention weights, so the
# package's layer keeps them in `.last_weights` only when asked (`layer.keep_weights = True`). Its parameter names
# are the ones used here, so loading our weights is a plain `load_state_dict`.
# We require identical logits; we compare in float64, where rounding noise is far below the 1e-6 bar,
# so any real difference would show.

# %%
from helpers.nn.model import DecoderOnlyTransformer, num_parameters


def to_package(nb_model):
    """A helpers.nn.model.DecoderOnlyTransformer holding nb_model's weights (names match one to one)."""
    package = DecoderOnlyTransformer(nb_model.cfg)
    package.load_state_dict(nb_model.state_dict())  # strict: fails loudly on any missing or extra name
    return package.eval()


package_model = to_package(model)
print("parameters:", num_parameters(cfg), "(the package's count) =", count_parameters(cfg), "(ours)")


# %% tags=["check"]
def check_same_as_package(nb_model, package_model):
    try:
        a, b = nb_model.double().eval(), package_model.double().eval()
        with torch.no_grad():
            for pl in (prefix_len, None):
                diff = (a(ids, pl) - b(ids, pl)).abs().max().item()
                assert diff <= 1e-6, (
                    f"notebook and helpers.nn.model disagree by {diff:.2e} (prefix_len={'given' if pl is not None else 'None'})"
                )
    finally:
        nb_model.float(), package_model.float()
    prefixes = [encode_prefix(fr) for fr, _ in PAIRS]
    ours = [greedy_translate(nb_model, p, 8) for p in prefixes]
    assert package_model.generate(prefixes, 8, eos_id=EOS) == ours, (
        "helpers.nn.model.generate should translate exactly like greedy_translate"
    )


check_same_as_package(model, package_model)
print("✓ helpers.nn.model.DecoderOnlyTransformer gives the same logits and translations")

# %% [markdown]
# ## What we built
#
# Embeddings and positions (a fixed table, and rotary's turn of queries and keys), attention with the right
# softmax, scale and mask, heads split and merged, causal and prefix-LM masks, a feed-forward network, pre-LN
# residual blocks, weight tying, a parameter count, a training loop that memorises, and cached generation.
# Notebook 03 trains the same model, now `helpers.nn.model.DecoderOnlyTransformer`, on real French–English
# sentences; each preset picks its kind of positions (notebook 03, section 2).

# %% [markdown]
# ## Export for your report
#
# One call gathers every figure so far (PDF and PNG), every metrics file, and a generated `index.md` with each
# figure's title, the question it answers, its caption, the numbers behind it and a LaTeX snippet to paste,
# into `reports/report.zip`. On Colab the zip is saved to Google Drive when Drive is mounted, and offered for
# download: closing the tab then loses nothing. From a terminal: `python -m helpers report`.

# %%
from helpers.course import report  # noqa: E402

report.export()

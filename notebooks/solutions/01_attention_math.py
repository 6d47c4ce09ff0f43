# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] tags=["badge"]
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/01_attention_math.ipynb) [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/01_attention_math.ipynb)
#
# **Solutions**: the solved notebook, with model answers and grading rubrics. Learners start from the exercise version, [`notebooks/01_attention_math.ipynb`](https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/01_attention_math.ipynb).

# %% [markdown]
# # 01 · The attention math you can run
#
# Attention fits in two lines of linear algebra, and the classic written questions about it
# (is $\alpha$ a distribution? when does attention copy? how can one query average two values?
# why several heads? why rescale the scores, and by what?) have short answers on paper. Here you answer them,
# and every answer meets an experiment: a few lines of code that measure it, and a figure for your
# report. Your answers become code that checks hold to account.
#
# **How each question works.** A question (**Question 1.N (K points).**) is followed by a *Your answer*
# cell: write your derivation and conclusion there, with the numbers from the code cell under it, where
# you compute what supports your answer (it starts with a small working example you can edit). The nine
# questions carry **20 points**, graded by hand. The exercises then turn your results into code that
# checks can test: **11 exercises, 22 points**, graded automatically. The instructor's copy also holds a
# model answer and a grading rubric after each question; your copy does not.
#
# **What you will learn**
#
# - whether the attention weights always form a probability distribution, and how softmax stays finite;
# - how to design a query that *copies* one value, and one that *averages* two, with error bounds you derive;
# - how to design a linear map that recovers one vector from a sum of two;
# - what a single head does when a key's length varies, and what two heads change;
# - what key, query and value projections buy you in self-attention;
# - whether self-attention knows word order, and what adding positions changes;
# - why the scores are rescaled before the softmax, and by what.
#
# The questions follow the written self-attention exercises of Stanford's CS224N.
#
# **How to run.** On Colab: *Runtime → Run all* (a CPU runtime is enough here). In a live
# notebook, sliders appear under several figures. Headless, from the repository root:
# `QUICK=1 python -m helpers run-notebooks --only 01`. Figures go to `reports/figures/01_*.pdf`
# and `.png`. Cells tagged `check` hold the asserts; `tests/notebooks/test_notebook01.py` calls them again
# with broken inputs to show that each one can fail.
#
# **Notation.** In the math, vectors are columns and a score is $k_i^\top q$. In the code, vectors
# are rows: `K` is `(n, d)` and `K[i]` is key $i$.


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

# %% tags=["verifier"]
# Sizes, and two small conveniences. Double precision: we measure errors down to 1e-12,
# which float32 rounding (about 1e-7) would hide.
import math

import matplotlib.pyplot as plt
import torch

from helpers.course.plotting import save_figure, save_then_explore

DTYPE = torch.float64
N_MC = 2_000 if QUICK else 20_000  # Monte Carlo draws of the keys (items 5 and 6)
N_TRIALS = 300 if QUICK else 1_000  # random (q, K) draws per point (items 1 and 9)
N_SWEEP = 25 if QUICK else 100  # points along each sweep


def rng(item: int) -> torch.Generator:
    """A fresh generator per item, so each section gives the same numbers however the notebook is run."""
    return torch.Generator().manual_seed(SEED + item)


# %% [markdown]
# ## 0. Attention in one line
#
# A query $q \in \mathbb{R}^d$ looks at $n$ keys $k_1, \dots, k_n \in \mathbb{R}^d$, each paired
# with a value $v_i \in \mathbb{R}^{d_v}$. It scores every key by a dot product, turns the scores
# into weights with a softmax, and returns the weighted average of the values:
#
# $$\alpha_i = \frac{\exp(k_i^\top q)}{\sum_{j=1}^n \exp(k_j^\top q)}, \qquad c = \sum_{i=1}^n \alpha_i v_i .$$
#
# Stack the keys and values as the rows of $K \in \mathbb{R}^{n\times d}$ and $V \in \mathbb{R}^{n\times d_v}$, and
# $m$ queries as the rows of $Q$: the whole computation is then two matrix products and one softmax. Which products,
# and along which axis the softmax must run, is yours to work out in Exercise 1.1 (the weights of each query sum to 1
# over the keys).

# %% [markdown]
# ### Exercise 1.1 · Softmax attention (3 points)
#
# Write `attend` for one query or a batch of them. The check compares it with weights worked out by
# hand and with the package's `helpers.nn.attention.attention`, which later notebooks import; calling the
# package from `attend` does not count.


# %%
def attend(q, K, V):
    """Softmax attention. q: (d,) or (..., m, d); K: (..., n, d); V: (..., n, d_v). Returns (c, alpha)."""
    # BEGIN SOLUTION
    scores = q @ K.transpose(-2, -1)  # (..., m, n): one score k_i . q per query and key
    alpha = torch.softmax(scores, dim=-1)  # normalise over the keys, separately for each query
    return alpha @ V, alpha  # (..., m, d_v) and (..., m, n)
    # END SOLUTION


# %% [markdown]
# A tiny example: three keys in $\mathbb{R}^2$ and one-hot values, so $c$ simply *is* $\alpha$.
# The query $q = (2, 0)$ scores the first and third keys equally ($2$) and the second one at $0$.

# %% tags=["verifier"]
K0 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=DTYPE)  # (3, 2) keys
V0 = torch.eye(3, dtype=DTYPE)  # (3, 3) one-hot values
q0 = torch.tensor([2.0, 0.0], dtype=DTYPE)
c0, alpha0 = attend(q0, K0, V0)
print("scores:", [float(k @ q0) for k in K0])  # k_i . q, key by key
print("alpha: ", [round(a, 3) for a in alpha0.tolist()])
print("c:     ", [round(x, 3) for x in c0.tolist()])

# %% [markdown]
# `attend` is also `helpers.nn.attention.attention`, which later notebooks import (it adds an
# optional scale and mask). The check below, and a test, hold the two to the same numbers.

# %% tags=["check"]
import helpers.nn.attention
from helpers.course import probes
from helpers.nn.attention import attention


def reaches_the_package(fn):
    """True if fn's code uses helpers.nn.attention: a name bound to it or to one of its functions, or an import."""
    names = set(fn.__code__.co_names)
    bound = [fn.__globals__.get(name) for name in names]
    return any(name.startswith("helpers") for name in names) or any(
        value is helpers.nn.attention or getattr(value, "__module__", None) == "helpers.nn.attention" for value in bound
    )


def check_matches_package(attend_fn, seed=SEED):
    """attend_fn must give the weights worked out by hand, and the same (c, alpha) as helpers.nn.attention.attention
    for one query and for batches."""
    e2 = math.exp(2)  # the tiny example: scores (2, 0, 2)
    _, alpha = attend_fn(q0, K0, V0)
    expected = torch.tensor([e2, 1.0, e2], dtype=DTYPE) / (2 * e2 + 1)
    assert probes.close(alpha, expected, atol=1e-12), (
        f"the tiny example's weights are {alpha.tolist()}, not {expected.tolist()}"
    )
    g = torch.Generator().manual_seed(seed)
    for q_shape, kv_batch in [((8,), ()), ((4, 8), ()), ((2, 4, 8), (2,))]:
        q = torch.randn(q_shape, generator=g, dtype=DTYPE)
        K = torch.randn(*kv_batch, 5, 8, generator=g, dtype=DTYPE)
        V = torch.randn(*kv_batch, 5, 3, generator=g, dtype=DTYPE)
        (c, alpha), (c_ref, alpha_ref) = attend_fn(q, K, V), attention(q, K, V)
        assert probes.close(alpha, alpha_ref, atol=1e-12), f"weights differ from the package for q {q_shape}"
        assert probes.close(c, c_ref, atol=1e-12), f"outputs differ from the package for q {q_shape}"


def probe_attend(attend_fn, seed=SEED):
    """Runs your function (the check's inputs drawn from `seed`): whether it calls the package, and what it returns."""
    return {"calls the package": reaches_the_package(attend_fn),
            "results": probes.record(check_matches_package, attend_fn, seed=seed)}  # fmt: skip


def verify_attend(values, seed=SEED):
    """Without calling the package; the same check on what the probe recorded."""
    assert not values["calls the package"], "attend calls helpers.nn.attention: write the attention yourself"
    probes.replay(check_matches_package, values["results"], seed=seed)


verify_attend(probe_attend(attend))


# %% [markdown]
# ## 1. Are the weights $\alpha$ a distribution?
#
# The softmax turns any real scores into weights. Are they always a probability distribution,
# whatever the query and the keys, and does that survive floating point?

# %% [markdown] tags=["question"]
# **Question 1.1 (2 points).** Is $\alpha$ a probability distribution over the keys for *any* query and keys?
# Prove it from the formula. Then evaluate the formula literally, in float64, on the scores
# $(1000, 0)$: what comes out, why, and how can the same $\alpha$ be computed so that nothing overflows
# whatever the scores?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the exponentials of two scores, then their fraction.
scores_try = torch.tensor([1000.0, 0.0], dtype=DTYPE)  # edit: try other scores
exp_try = torch.exp(scores_try)
print("exp(scores):", exp_try.tolist(), "  fraction:", (exp_try / exp_try.sum()).tolist())

# %% [markdown] tags=["answer"]
# **Model answer.** Each $\exp(k_i^\top q) > 0$, so every $\alpha_i > 0$, and dividing by the sum makes
# $\sum_i \alpha_i = 1$: a distribution, for any query and keys. In floating point there is a catch:
# $\exp(s)$ overflows to $\infty$ for $s > 709$ (float64), and $\infty/\infty$ is NaN, so the literal
# formula gives $(\mathrm{NaN}, 0)$ for the scores $(1000, 0)$. Multiplying the numerator and the
# denominator by $e^{-c}$ changes nothing, for any constant $c$; softmax takes $c = s^\ast$, the largest
# score of the row:
#
# $$\alpha_i = \frac{e^{s_i - s^\ast}}{\sum_j e^{s_j - s^\ast}} .$$
#
# Now the largest term is $e^0 = 1$, so the denominator lies in $[1, n]$ and nothing overflows;
# tiny weights may underflow to exactly $0$, which is why the check asks for $\alpha_i \ge 0$.

# %% [markdown]
# **Experiment.** Random $q$ and $K$, with $q$ multiplied by a scale $s$ from $10^{-12}$ to
# $10^{12}$, so that the scores range from "all equal" to about $10^{13}$.

# %% tags=["check"]
SCALES = [10.0**e for e in range(-12, 13, 2)]


def check_categorical(attend_fn, scales=SCALES, m=5, n=8, d=16, repeats=20, seed=SEED):
    """For every scale, each of m queries must get weights over the n keys that are finite, >= 0 and sum to 1."""
    g = torch.Generator().manual_seed(seed)
    for s in scales:
        q = s * torch.randn(repeats, m, d, generator=g, dtype=DTYPE)  # (R, m, d)
        K = torch.randn(repeats, n, d, generator=g, dtype=DTYPE)  # (R, n, d)
        V = torch.randn(repeats, n, 3, generator=g, dtype=DTYPE)
        _, alpha = attend_fn(q, K, V)
        assert alpha.shape == (repeats, m, n), f"expected weights of shape {(repeats, m, n)}, got {tuple(alpha.shape)}"
        assert not torch.isnan(alpha).any(), f"NaN weights at scale {s:g}"
        assert (alpha >= 0).all(), f"negative weights at scale {s:g}"
        sums = alpha.sum(dim=-1)
        assert probes.close(sums, torch.ones_like(sums), atol=1e-12), (
            f"weights do not sum to 1 over the keys at scale {s:g} (worst sum {sums.flatten()[(sums - 1).abs().argmax()]:.6g})"
        )


check_categorical(attend)
print(f"check_categorical passed at {len(SCALES)} scales from 1e-12 to 1e12.")

# %% [markdown]
# **The figure.** The query's scale $s$ multiplies every score. Left: one query's weights at three
# scales. Right: the entropy $H(\alpha) = -\sum_i \alpha_i \log \alpha_i$ averaged over random draws,
# against the scale, with $\log n$ (the entropy of the uniform distribution) and $0$ (one-hot) marked.


# %%
def mean_entropy(scales, n=8, d=16):
    """Mean entropy (nats) of the weights of random unit queries at each scale."""
    g = rng(1)
    qs = torch.randn(N_TRIALS, 1, d, generator=g, dtype=DTYPE)
    qs = qs / qs.norm(dim=-1, keepdim=True)  # (R, 1, d): unit queries, so the scale s alone sets their length
    Ks = torch.randn(N_TRIALS, n, d, generator=g, dtype=DTYPE)  # (R, n, d)
    return [-torch.special.xlogy(a, a).sum(-1).mean().item() for a in (attend(s * qs, Ks, Ks)[1] for s in scales)]


ENTROPY_SCALES = torch.logspace(-2, 2, N_SWEEP).tolist()


def plot_categorical(n=8, d=16):
    g = rng(1)
    q = torch.randn(d, generator=g, dtype=DTYPE)
    q = q / q.norm()  # a unit query: the scale s is its length
    K = torch.randn(n, d, generator=g, dtype=DTYPE)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.27
    for i, s in enumerate([0.1, 1.0, 5.0]):
        _, alpha = attend(s * q, K, K)
        ax1.bar([k + (i - 1) * width for k in range(n)], alpha.numpy(), width, label=f"scale {s:g}")
    ax1.set(xlabel="key index $i$", ylabel=r"weight $\alpha_i$", title="One query, three scales")
    ax1.legend()
    ax2.semilogx(ENTROPY_SCALES, mean_entropy(ENTROPY_SCALES, n, d), marker=".", label=r"mean $H(\alpha)$")
    ax2.axhline(math.log(n), ls="--", c="gray", label=r"$\log n$ (uniform)")
    ax2.axhline(0, ls=":", c="gray", label="0 (one-hot)")
    ax2.set(xlabel="scale $s$ of the query", ylabel="entropy (nats)", title=f"Entropy of the weights, n={n} keys")
    ax2.legend()
    fig.tight_layout()
    return fig


save_then_explore(
    plot_categorical,
    "01_categorical_weights",
    question="Is alpha a probability distribution, and how does the query's scale shape it?",
    caption="Left: one query's attention weights over 8 keys at three scales. Right: the mean entropy of the "
    "weights against the query's scale, with log n (uniform) and 0 (one-hot) marked.",
    n=(2, 64, 1, 8),
)
entropies = mean_entropy(ENTROPY_SCALES)
print(
    f"mean entropy (nats): {entropies[0]:.3f} at scale {ENTROPY_SCALES[0]:g}, {entropies[-1]:.3f} at scale "
    f"{ENTROPY_SCALES[-1]:g}; lowest {min(entropies):.3f}, highest {max(entropies):.3f}; log n = {math.log(8):.3f}"
)


# %% tags=["answer"]
# The solved notebook's sentence, computed from the entropies above (the student copy prints only the numbers).
def describe_entropy(entropies, n):
    """One sentence from the measured entropies, ordered by scale (it changes if the numbers do)."""
    log_n = math.log(n)
    trend = "falls" if entropies[-1] < entropies[0] else "does not fall"
    inside = all(-1e-12 <= h <= log_n + 1e-12 for h in entropies)
    where = "and stays inside [0, log n]" if inside else "and LEAVES [0, log n]: these are not distributions"
    return (
        f"The mean entropy {trend} from {entropies[0]:.3f} nats at the smallest scale to {entropies[-1]:.3f} at "
        f"the largest (log n = {log_n:.3f}), {where}."
    )


print(describe_entropy(entropies, n=8))

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* The scale acts as an inverse temperature: a small query spreads its
# weight almost uniformly (entropy near $\log n$), a large one puts nearly all of it on the best key
# (entropy near $0$). The entropy never leaves $[0, \log n]$, as it must for a distribution.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.1 (2 points).**
# - **2 points:** proves $\alpha_i > 0$ and $\sum_i \alpha_i = 1$, so $\alpha$ is a distribution for any query and
#   keys; says the literal formula gives $(\mathrm{NaN}, 0)$ for $(1000, 0)$ because $e^{1000}$ overflows to
#   $\infty$ and $\infty/\infty$ is NaN; computes $\alpha$ with the row's largest score subtracted,
#   $e^{s_i - s^\ast}/\sum_j e^{s_j - s^\ast}$, which is the same fraction and cannot overflow.
# - **1 point:** the proof, or the overflow and its fix, but not both; or the fix without why it leaves
#   $\alpha$ unchanged.
# - **0 points:** says $\alpha$ can fail to be a distribution (negative weights, sums other than 1), or blames
#   the NaN on something other than the overflow.
#
# *Key phrases:* "largest score", "\infty/\infty", "is a distribution"

# %% [markdown]
# ### Exercise 1.2 · A softmax that never overflows (2 points)
#
# `naive_softmax` below is the textbook formula, written literally. Write `stable_softmax`, which gives
# the same weights but stays finite for any scores, using what you found in Question 1.1. It works on
# the last axis of a tensor of any shape (a batch of rows of scores), and each row may sit at its own
# level (one row near $1000$, the next near $-1000$). The check compares it with the weights the formula
# gives in exact arithmetic on such scores, and with `torch.softmax` on random ones. Section 9 then uses your softmax.


# %%
def naive_softmax(scores):
    """The textbook formula: exp, then divide by the sum over the last axis."""
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)


def stable_softmax(scores):
    """Softmax over the last axis of `scores` (any shape, any float dtype), finite for any finite scores.

    Each row may sit at its own level. Do not call torch.softmax or any other softmax.
    """
    # BEGIN SOLUTION
    shifted = scores - scores.amax(dim=-1, keepdim=True)  # each row's largest score becomes 0: exp <= 1
    e = torch.exp(shifted)
    return e / e.sum(dim=-1, keepdim=True)  # the denominator is >= 1: no 0/0 either
    # END SOLUTION


# %% tags=["check"]
def names_used(code) -> set:
    """Every global and attribute name a function's code (and the functions defined inside it) uses."""
    return set(code.co_names).union(*(names_used(c) for c in code.co_consts if hasattr(c, "co_names")))


# %% tags=["check"]
from helpers.course import check_inputs  # noqa: E402 (the check's inputs, out of reach while 1.2 is graded)


def check_stable_softmax(softmax_fn, seed=SEED):
    """Exact weights on scores near +-1000 (where float64's exp overflows), and torch.softmax on random scores."""
    by_hand = {  # name: (scores, the weights the textbook formula gives in exact decimal arithmetic, as floats)
        name: (scores, check_inputs.exact_softmax(scores))
        for name, scores in {
            "(1000, 999, 998)": [[1000.0, 999.0, 998.0]],
            "(1000, -1000)": [[1000.0, -1000.0]],
            "(-1000, -1001)": [[-1000.0, -1001.0]],
            "two rows, one near 1000 and one near -1000": [[1000.0, 999.0], [-1000.0, -1001.0]],
            "four equal scores": [[3.0, 3.0, 3.0, 3.0]],
        }.items()
    }
    for name, (scores, expected) in by_hand.items():
        alpha = softmax_fn(torch.tensor(scores, dtype=DTYPE))
        assert tuple(alpha.shape) == (len(scores), len(scores[0])), (
            f"scores {name}: weights of shape {tuple(alpha.shape)}, expected the shape of the scores"
        )
        assert torch.isfinite(alpha).all(), f"scores {name}: the weights hold NaN or inf: {alpha.tolist()}"
        torch.testing.assert_close(
            alpha,
            torch.tensor(expected, dtype=DTYPE),
            rtol=1e-12,
            atol=1e-12,
            msg=lambda m, name=name, alpha=alpha: (
                f"scores {name}: weights {alpha.tolist()} differ from the exact ones. {m}"
            ),
        )
    g = torch.Generator().manual_seed(seed)
    for dtype in (torch.float32, torch.float64):
        scores = 20 * torch.randn(3, 4, 7, generator=g, dtype=dtype)  # (batch, rows, keys)
        alpha = softmax_fn(scores)
        assert alpha.dtype == dtype, f"{dtype} scores gave {alpha.dtype} weights: keep the dtype"
        torch.testing.assert_close(
            alpha,
            torch.softmax(scores, dim=-1),
            msg=lambda m, dtype=dtype: f"{dtype}: differs from torch.softmax(dim=-1). {m}",
        )


def probe_stable_softmax(softmax_fn, seed=SEED):
    """Runs your function: which library softmax its code names, and what it returns on the check's scores."""
    library = {"softmax", "log_softmax", "logsumexp", "softmin"} & names_used(softmax_fn.__code__)
    return {"library": sorted(library), "results": probes.record(check_stable_softmax, softmax_fn, seed=seed)}


def verify_stable_softmax(values, seed=SEED):
    assert not values["library"], (
        f"stable_softmax calls {values['library']}: the exercise is to write the softmax yourself"
    )
    probes.replay(check_stable_softmax, values["results"], seed=seed)


verify_stable_softmax(probe_stable_softmax(stable_softmax))

# %%
for row in ([1000.0, 0.0], [1000.0, 999.0], [-1000.0, -1001.0]):
    s = torch.tensor(row, dtype=DTYPE)
    print(
        f"scores {str(row):18s} naive: {[round(x, 4) for x in naive_softmax(s).tolist()]}   "
        f"yours: {[round(x, 4) for x in stable_softmax(s).tolist()]}   torch.softmax: "
        f"{[round(x, 4) for x in torch.softmax(s, -1).tolist()]}"
    )

# %% [markdown]
# ## 2. Copying one value
#
# Take $n$ keys of unit norm, no two alike, and pick one of them, $k_j$. Can a single query make attention
# *copy* its value, that is, return $c \approx v_j$ whatever the values are?


# %%
def unit_keys_and_values(n, d, d_v, g):
    K = torch.randn(n, d, generator=g, dtype=DTYPE)
    K = K / K.norm(dim=-1, keepdim=True)  # unit keys
    V = torch.randn(n, d_v, generator=g, dtype=DTYPE)
    return K, V


K2, V2 = unit_keys_and_values(16, 16, 4, rng(2))  # (16, 16) unit keys, (16, 4) values; j = 0 below

# %% [markdown]
# ### Exercise 1.3 · A query that copies (2 points)
#
# Design a query of norm $s$ that makes attention return $v_j$, more exactly as $s$ grows. The check asks
# what your query *does*, not what it is: on unit keys of several sizes (no two within $0.1$ of each
# other, measured as $1 - k_i^\top k_{i'}$) and random values, at $s = 200$, the output must lie within
# $10^{-6}$ of the values' spread from $v_j$, for the first key and for the last, and the query must have
# the norm asked for. The sweeps below scale your query through $s$.


# %%
def copying_query(K, j, s):
    """A query (d,) of norm s for which attention over the keys K (n, d) returns about v_j, whatever the values,
    more exactly as s grows.

    K: n rows of unit norm, no two equal; j: the key whose value to copy; s >= 0: the query's norm.
    """
    # BEGIN SOLUTION
    return s * K[j]  # scores s k_i . k_j: key j's own, s, beats every other by s times its gap to k_j
    # END SOLUTION


# %% tags=["check"]
def spaced_unit_keys(n, d, g, min_gap=0.1):
    """n random unit keys in R^d, drawn again until no two are within min_gap (1 - k_i . k_i' >= min_gap)."""
    while True:
        K = torch.randn(n, d, generator=g, dtype=DTYPE)
        K = K / K.norm(dim=-1, keepdim=True)
        cos = K @ K.T - 2 * torch.eye(n, dtype=DTYPE)  # the diagonal pushed out of the way
        if 1 - cos.max() >= min_gap:
            return K


def check_copying_query(query_fn, s=200.0, seed=SEED):
    """query_fn(K, j, s) must have norm s and make attention return v_j, on keys it has never seen."""
    g = torch.Generator().manual_seed(seed)
    for n, d in [(2, 3), (16, 16), (64, 32)]:
        K = spaced_unit_keys(n, d, g)
        V = torch.randn(n, 4, generator=g, dtype=DTYPE)
        for j in (0, n - 1):
            where = f"n={n} keys in d={d}, j={j}"
            q = query_fn(K, j, s)
            assert tuple(q.shape) == (d,), f"{where}: the query has shape {tuple(q.shape)}, not ({d},)"
            c, alpha = attend(q, K, V)
            spread = (V - V[j]).norm(dim=-1).max()
            miss = (c - V[j]).norm() / spread
            assert miss < 1e-6, (
                f"{where}, s={s:g}: ||c - v_j|| is {miss:.2e} of the spread and the weight on key j is "
                f"{alpha[j]:.4f}: c is not a copy of v_j"
            )
            assert abs(q.norm() - s) <= 1e-9 * s, f"{where}: your query has norm {q.norm():.6g}, not s = {s:g}"


def probe_copying_query(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_copying_query, fn, seed=seed)


def verify_copying_query(results, seed=SEED):
    """The check again, on what your function returned: expected values computed here."""
    probes.replay(check_copying_query, results, seed=seed)


verify_copying_query(probe_copying_query(copying_query))

# %% [markdown]
# #### Your copying query at work
#
# On the 16 keys drawn above, for a few norms $s$: the weight on key $j = 0$ and the copy error.

# %%
for s in [0.0, 5.0, 20.0, 40.0]:
    c_try, alpha_try = attend(copying_query(K2, 0, s), K2, V2)
    print(f"s = {s:4.0f}: alpha_j = {alpha_try[0]:.6f}, ||c - v_j|| = {(c_try - V2[0]).norm():.2e}")

# %% [markdown] tags=["question"]
# **Question 1.2 (2 points).** Why does your query copy, and how well? Call
# $\Delta = 1 - \max_{i\neq j} k_i^\top k_j > 0$ the gap between $k_j$ and the runner-up, and
# $\max_i \lVert v_i - v_j\rVert$ the spread of the values around $v_j$. Bound the copy error
# $\lVert c - v_j\rVert$ of your query of norm $s$ from above in terms of the number of keys $n$, the gap
# $\Delta$, the spread and $s$. How fast does the error shrink as $s$ grows? Why does the question ask for
# keys of unit norm?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the gap and the spread of the 16 keys above, and the copy
# error of your query at one norm.
gap_try = (1 - K2[1:] @ K2[0]).min().item()
spread_try = (V2 - V2[0]).norm(dim=-1).max().item()
c_try, _ = attend(copying_query(K2, 0, 20.0), K2, V2)
print(f"gap {gap_try:.3f}, spread {spread_try:.3f}, copy error at s = 20: {(c_try - V2[0]).norm():.2e}")

# %% [markdown] tags=["answer"]
# **Model answer.** The copying query is $q = s\,k_j$ (the solution of Exercise 1.3): the scores are
# $s\,k_i^\top k_j$, largest for $i=j$ (where it is $s$).
# Dividing the numerator and the denominator of $\alpha_j$ by $e^{s}$:
#
# $$1 - \alpha_j = \frac{\sum_{i\ne j} e^{-s(1-k_i^\top k_j)}}{1 + \sum_{i\ne j} e^{-s(1-k_i^\top k_j)}} \le \min\!\big(1, (n-1)\,e^{-s\Delta}\big) \xrightarrow[s\to\infty]{} 0 .$$
#
# And since $c - v_j = \sum_{i\ne j}\alpha_i (v_i - v_j)$, the copy error obeys
#
# $$\lVert c - v_j\rVert \le (1-\alpha_j)\,\max_i \lVert v_i - v_j\rVert \le \min\!\big(1, (n-1)e^{-s\Delta}\big)\max_i \lVert v_i - v_j\rVert .$$
#
# The error shrinks *exponentially* in the query's norm, at a rate set by how distinct the keys are
# ($\Delta$). The bound is nearly reached when every other key sits at the gap $\Delta$ and every other
# value at the same distance from $v_j$. "Aligned" matters more than it sounds: with keys of
# different lengths, a longer key $k_i$ can have a larger score $k_i^\top k_j$ than $k_j^\top k_j$, and
# attention then copies $v_i$. Unit keys rule that out.

# %% [markdown]
# ### Exercise 1.4 · The copy-error bound (2 points)
#
# Write the bound you derived in Question 1.2 as a function of $n$, $\Delta$, the spread and $s$. The
# check holds it from both sides, on several configurations. It must hold: the check builds the keys
# and values that make the copy error as large as it can be with these numbers, measures that error,
# and your bound may not be below it. And it must say something: it may not be more than twice that largest
# error, so `float("inf")` or the spread alone do not pass. The figure then draws your bound against the error
# measured on random keys.


# %%
def copy_error_bound(n, gap, spread, s):
    """An upper bound on ||c - v_j|| for your copying query of norm s with n unit keys (Question 1.2).

    n: the number of keys; gap: Delta = 1 - max_{i != j} k_i . k_j (> 0); spread: max_i ||v_i - v_j||;
    s >= 0: the query's scale. Returns a float that holds for every such keys and values.
    """
    # BEGIN SOLUTION
    others = (n - 1) * math.exp(-s * gap)  # the n - 1 other weights, each at most e^{-s gap} times alpha_j
    return min(1.0, others) * spread  # 1 - alpha_j <= min(1, others), and c - v_j = sum alpha_i (v_i - v_j)
    # END SOLUTION


def copying_sweep(K, V, j, scales):
    """For your copying query at each norm s: alpha_j, the measured copy error ||c - v_j|| and your bound."""
    gap = (1 - torch.cat([K[:j], K[j + 1 :]]) @ K[j]).min().item()  # Delta, the gap to the runner-up
    spread = (V - V[j]).norm(dim=-1).max().item()
    rows = []
    for s in scales:
        c, alpha = attend(copying_query(K, j, s), K, V)
        rows.append((alpha[j].item(), (c - V[j]).norm().item(), float(copy_error_bound(len(K), gap, spread, s))))
    return torch.tensor(rows, dtype=DTYPE)  # (len(scales), 3)


COPY_SCALES = torch.linspace(0, 80, N_SWEEP, dtype=DTYPE).tolist()
copy = copying_sweep(K2, V2, 0, COPY_SCALES)
print(
    f"scale {COPY_SCALES[0]:.0f}: alpha_j = {copy[0, 0]:.4f} (1/n = {1 / len(K2):.4f});  scale {COPY_SCALES[-1]:.0f}: "
    f"alpha_j = {copy[-1, 0]:.12f}, ||c - v_j|| = {copy[-1, 1]:.1e}, your bound {copy[-1, 2]:.1e}"
)

# %% [markdown]
# **The figure.** Left: $\alpha_j$ against your query's norm $s$, from $1/n$ at $s = 0$. Right: the
# measured copy error and your bound, on a log scale; a curve that leaves the plot at the bottom has
# reached exactly $0$ in float64. Use the sliders to change the number of keys and their dimension
# (fewer dimensions put the keys closer together: a smaller $\Delta$).


# %%
def plot_copying(n=16, d=16):
    K, V = unit_keys_and_values(n, d, 4, rng(2))
    sweep = copying_sweep(K, V, 0, COPY_SCALES)
    zoom = torch.linspace(0, 15, N_SWEEP).tolist()  # a closer look at small s
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax1.plot(zoom, copying_sweep(K, V, 0, zoom)[:, 0].numpy(), marker=".")
    ax1.axhline(1, ls=":", c="gray")
    ax1.axhline(1 / n, ls="--", c="gray", label="$1/n$ (uniform)")
    ax1.set(xlabel="norm $s$ of your copying query", ylabel=r"$\alpha_j$", title="Weight on key $j$")
    ax1.legend()
    ax2.semilogy(COPY_SCALES, sweep[:, 1].numpy(), marker=".", label=r"measured $\|c - v_j\|$")
    ax2.semilogy(COPY_SCALES, sweep[:, 2].numpy(), ls="--", label="your bound (Exercise 1.4)")
    ax2.set(xlabel="norm $s$ of your copying query", ylabel="copy error", title=f"Copy error, n={n} unit keys in d={d}")
    ax2.set_ylim(bottom=1e-17)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


save_then_explore(
    plot_copying,
    "01_copying_sharpness",
    question="Can attention copy one value, and how fast does the copy error shrink with the query's norm?",
    caption="Left: the weight on key j against the norm s of the copying query of Exercise 1.3. Right: the copy "
    "error ||c - v_j|| against s (log scale), measured on random unit keys, and the bound of Exercise 1.4 (dashed).",
    n=(2, 64, 1, 16),
    d=(2, 64, 1, 16),
)


# %% tags=["check"]
# check_inputs.worst_copy_case(n, gap, spread): keys and values the check measures your bound against, out of your
# solution's reach while it is graded.

# (n, gap, spread, s): the cases the bound is held to
COPY_CASES = [(16, 0.5, 1.0, 0.0), (16, 0.5, 2.0, 4.0), (16, 0.5, 2.0, 12.0), (8, 0.2, 0.5, 60.0), (64, 1.0, 3.0, 20.0),
              (4, 1.5, 1.0, 8.0), (2, 2.0, 0.25, 5.0)]  # fmt: skip


def copy_cases(seed):
    """COPY_CASES and one case drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    n, gap, spread, s = (
        int(torch.randint(2, 40, (1,), generator=g)),
        *(torch.rand(3, generator=g) * torch.tensor([1.8, 3.0, 30.0])).tolist(),
    )
    return [*COPY_CASES, (n, 0.1 + gap, 0.1 + spread, s)]


def check_copying_bound(bound_fn, looser_than=2.0, seed=SEED):
    """Two-sided: bound_fn(n, gap, spread, s) must be >= the worst copy error and <= looser_than x that error."""
    for n, gap, spread, s in copy_cases(seed):
        where = f"n={n}, gap={gap:g}, spread={spread:g}, s={s:g}"
        bound = float(bound_fn(n, gap, spread, s))
        K, V = check_inputs.worst_copy_case(n, gap, spread, dtype=DTYPE)
        c, _ = attend(copying_query(K, 0, s), K, V)
        worst = (c - V[0]).norm().item()
        assert bound >= worst * (1 - 1e-9), (
            f"{where}: keys and values exist whose copy error is {worst:.4e}, above your bound {bound:.4e}: "
            "the bound does not hold"
        )
        assert bound <= looser_than * worst, (
            f"{where}: your bound {bound:.4e} is more than {looser_than:g}x the largest error these numbers allow "
            f"({worst:.4e}): it holds, but too loosely to say how fast the error shrinks"
        )


def check_sweep_under_bound(sweep):
    measured, bound = sweep[:, 1], sweep[:, 2]
    assert (measured <= bound + 1e-12).all(), f"measured copy error exceeds the bound by {(measured - bound).max():.2e}"


def probe_copying_bound(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_copying_bound, fn, seed=seed)


def verify_copying_bound(results, seed=SEED):
    """The bound against the worst case, computed here with the reference's copying query."""
    probes.replay(check_copying_bound, results, seed=seed)


verify_copying_bound(probe_copying_bound(copy_error_bound))
check_sweep_under_bound(copy)

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* $\alpha_j$ climbs from $1/n$ to $1$ within a few units of $s$. On the
# log scale the copy error falls along a straight line (exponential decay, with a slope of at least
# $\Delta$), always under the bound, until float64 rounds it to exactly $0$. More keys, or fewer
# dimensions (a smaller $\Delta$), need a larger query for the same error.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.2 (2 points).** The bound's value is graded once, by Exercise 1.4's check; this rubric grades
# the reasoning.
# - **2 points:** why the query copies (key $j$'s score beats every other by $s$ times its gap); the steps of the
#   derivation: dividing by $e^{s}$ gives $1 - \alpha_j \le \min(1, (n-1)e^{-s\Delta})$, and
#   $c - v_j = \sum_{i\ne j}\alpha_i(v_i - v_j)$ turns it into the bound on $\lVert c - v_j\rVert$; the error shrinks
#   exponentially in $s$, at a rate set by $\Delta$; and with unit keys no other key out-scores $k_j$ (a longer key
#   could, and would be copied instead).
# - **1 point:** two of the three: why it copies with the derivation's steps, the rate, the reason for unit keys.
# - **0 points:** none of them, an error that shrinks like $1/s$, or a copy said to be exact at a finite $s$.
#
# *Key phrases:* "(n-1)e^{-s\Delta}", "exponentially", "longer key"

# %% [markdown]
# ## 3. Averaging two values with one query
#
# Take orthonormal keys ($k_i^\top k_j = \delta_{ij}$, so $d \ge n$) and two of them, $k_a$ and $k_b$. Can a single
# query make attention return the average $m = \tfrac12(v_a + v_b)$, whatever the values are?

# %%
from helpers.nn.attention import orthonormal_vectors


def orthonormal_setup(n, d_v, g):
    K = orthonormal_vectors(n, n, g, dtype=DTYPE)  # (n, n) orthonormal keys
    V = torch.randn(n, d_v, generator=g, dtype=DTYPE)  # (n, d_v) arbitrary values
    return K, V


# %% [markdown]
# ### Exercise 1.5 · A query that averages two values (2 points)
#
# Design a query whose score on $k_a$ is $\beta$ (that is, $k_a^\top q = \beta$) and that makes attention return
# $m$, more exactly as $\beta$ grows. The check asks what your query *does*: on orthonormal keys of several
# sizes and random values, at $\beta = 40$, the weights on $k_a$ and $k_b$ must be equal and $c$ must lie within
# $10^{-9} \max_i\lVert v_i\rVert$ of $m$, for two different pairs $a, b$; and the score on $k_a$ must be $\beta$.


# %%
def averaging_query(K, a, b, beta):
    """A query (d,) with score beta on key a (K[a] @ q == beta) for which attention over the orthonormal keys
    K (n, d) returns about (v_a + v_b) / 2, whatever the values, more exactly as beta grows."""
    # BEGIN SOLUTION
    return beta * (K[a] + K[b])  # scores beta for a and b, 0 for every other (orthonormal) key
    # END SOLUTION


def average_error(beta, K, V, a=0, b=1):
    """||c - (v_a + v_b)/2|| for your averaging query with score beta on k_a, and the weights alpha."""
    c, alpha = attend(averaging_query(K, a, b, beta), K, V)
    return (c - (V[a] + V[b]) / 2).norm().item(), alpha


# %% tags=["check"]
def check_averaging_query(query_fn, beta=40.0, seed=SEED):
    """query_fn(K, a, b, beta) must score k_a at beta and make attention return (v_a + v_b)/2, on new keys."""
    g = torch.Generator().manual_seed(seed)
    for n, d in [(3, 3), (16, 16), (64, 80)]:
        K, V = orthonormal_vectors(n, d, g, dtype=DTYPE), torch.randn(n, 4, generator=g, dtype=DTYPE)
        for a, b in [(0, 1), (n - 1, 1)]:
            where = f"n={n} orthonormal keys in d={d}, a={a}, b={b}"
            q = query_fn(K, a, b, beta)
            assert tuple(q.shape) == (d,), f"{where}: the query has shape {tuple(q.shape)}, not ({d},)"
            c, alpha = attend(q, K, V)
            assert abs(alpha[a] - alpha[b]) < 1e-9, (
                f"{where}: the weights on a and b are {alpha[a]:.4f} and {alpha[b]:.4f}: the query does not treat "
                "a and b alike"
            )
            miss = (c - (V[a] + V[b]) / 2).norm() / V.norm(dim=-1).max()
            assert miss < 1e-9, (
                f"{where}, beta={beta:g}: c is {miss:.2e} max||v|| from (v_a + v_b)/2 (the weights on a and b are "
                f"{alpha[a]:.4f} each): c is not their average"
            )
            assert abs(K[a] @ q - beta) <= 1e-9 * beta, f"{where}: the score on k_a is {K[a] @ q:.6g}, not {beta:g}"


def probe_averaging_query(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_averaging_query, fn, seed=seed)


def verify_averaging_query(results, seed=SEED):
    """The check again, on what your function returned: expected values computed here."""
    probes.replay(check_averaging_query, results, seed=seed)


verify_averaging_query(probe_averaging_query(averaging_query))

# %% [markdown]
# #### How well one query averages

# %% [markdown] tags=["question"]
# **Question 1.3 (2 points).** Why does your query average, and how well? With orthonormal keys, find the weights
# $\alpha$ of your query exactly and write $c - m$ in terms of them. How large must $\beta$, the score your query
# gives $k_a$, be as a function of $n$, so that $\lVert c - m\rVert \le \tau \max_i\lVert v_i\rVert$
# for *every* choice of the values? How does that $\beta$ grow with $n$?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the weights and the error of your query for a few betas, 16 keys.
K_try, V_try = orthonormal_setup(16, 4, rng(3))
for beta in [0.0, 2.0, 5.0, 10.0]:
    err_try, alpha_try = average_error(beta, K_try, V_try)
    print(f"beta = {beta:4.1f}: alpha_a = {alpha_try[0]:.4f}, alpha_b = {alpha_try[1]:.4f}, error = {err_try:.2e}")

# %% [markdown] tags=["answer"]
# **Model answer.** The averaging query is $q = \beta(k_a + k_b)$ (the solution of Exercise 1.5). Its scores are
# $\beta$ for $a$ and $b$ and $0$ for the $n-2$ others, so
#
# $$\alpha_a = \alpha_b = \frac{e^\beta}{2e^\beta + n - 2}, \qquad \alpha_i = \frac{1}{2e^\beta + n - 2}\ (i\ne a,b).$$
#
# Write $\varepsilon = \frac{n-2}{2e^\beta + n-2}$, the total weight on the other keys. Since
# $2\alpha_a - 1 = -\varepsilon$,
#
# $$c - m = (2\alpha_a - 1)\,m + \sum_{i\ne a,b}\alpha_i v_i = \varepsilon\,(\bar v_{\text{rest}} - m), \qquad
# \bar v_{\text{rest}} = \tfrac{1}{n-2}\textstyle\sum_{i\ne a,b} v_i .$$
#
# So the error is *exactly* $\varepsilon\,\lVert \bar v_{\text{rest}} - m\rVert$, and, since both
# vectors are averages of values,
#
# $$\lVert c - m\rVert \;\le\; 2\varepsilon \max_i \lVert v_i \rVert \;<\; (n-2)\,e^{-\beta}\max_i\lVert v_i\rVert ,$$
#
# with equality in the first step when $v_a = v_b$ and every other value is $-v_a$. The guarantee
# holds for every choice of values exactly when $2\varepsilon \le \tau$, that is
# $\beta \ge \log\!\big((n-2)(1/\tau - \tfrac12)\big)$: the query must grow like $\log n$. For $n = 64$
# and $\tau = 10^{-3}$ that is $\beta \ge 11.03$.

# %% [markdown]
# ### Exercise 1.6 · How large must β be? (2 points)
#
# Write the smallest $\beta$ of Question 1.3 as a function of $n$ and $\tau$. The check builds the
# values that make the error largest, measures the error at your $\beta$, and asks for exactly $\tau$:
# above it, $\beta$ is too small; below it, a smaller $\beta$ would do. Then, on random values, your
# $\beta$ must bring $c$ within $\tau$ of the average.


# %%
def beta_needed(n, tau):
    """The smallest score beta on k_a for which your averaging query guarantees ||c - (v_a + v_b)/2|| <= tau max_i
    ||v_i||, for every choice of the values, with n >= 3 orthonormal keys and 0 < tau < 1."""
    # BEGIN SOLUTION
    return math.log((n - 2) * (1 / tau - 0.5))
    # END SOLUTION


for n in [4, 64, 1024]:
    print(f"n={n:5d}: beta needed for a relative error 1e-3 is {beta_needed(n, 1e-3):.2f}")


# %% tags=["check"]
# check_inputs.worst_average_case(n): n orthonormal keys and values (max_i ||v_i|| = 1) the check measures your
# answer against, out of your solution's reach while it is graded.
from helpers.course import check_inputs  # noqa: F811 (each check cell imports what it uses)


def check_beta_needed(beta_fn, rel_tol=1e-6, seed=SEED):
    """At beta_fn(n, tau) the worst-case error must be tau: larger means beta is too small, smaller that it wastes."""
    for n in (3, 4, 64, 1024, int(torch.randint(5, 500, (1,), generator=torch.Generator().manual_seed(seed)))):
        K, V = check_inputs.worst_average_case(n, dtype=DTYPE)
        for tau in (0.1, 1e-3, 1e-6):
            beta = float(beta_fn(n, tau))
            err = average_error(beta, K, V)[0]
            where = (
                f"n={n}, tau={tau:g}: at beta = {beta:.4f} the worst-case values give an error of {err:.4g} max||v||"
            )
            assert err <= tau * (1 + rel_tol), f"{where}, above tau: beta is too small"
            assert err >= tau * (1 - rel_tol), f"{where}, below tau: a smaller beta would do (find the smallest)"


def check_average_of_two(beta, n, tol=1e-3, seed=SEED):
    """Random values, n orthonormal keys: at this beta, c is within tol max||v|| of (v_a+v_b)/2, and alpha_a = alpha_b."""
    K, V = orthonormal_setup(n, 4, torch.Generator().manual_seed(seed))
    err, alpha = average_error(beta, K, V)
    assert abs(alpha[0] - alpha[1]) < 1e-12, "alpha_a and alpha_b differ: the query does not treat a and b alike"
    assert err <= tol * V.norm(dim=-1).max(), (
        f"beta={beta:.2f}, n={n}: error {err:.2e} is not within {tol:g} of max ||v||"
    )


def probe_beta_needed(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_beta_needed, fn, seed=seed)


def verify_beta_needed(results, seed=SEED):
    """At each beta your function returned, the worst-case error computed here."""
    probes.replay(check_beta_needed, results, seed=seed)


verify_beta_needed(probe_beta_needed(beta_needed))
check_average_of_two(beta_needed(64, 1e-3), n=64)

# %% [markdown]
# **The figure.** Left: the error for the worst-case values against $\beta$, for several $n$, with your
# $\beta$ for each $n$ dotted and $\tau$ dashed. Right: the smallest $\beta$ that reaches $\tau$, found by
# bisection on the measured error (dots), and your `beta_needed` (line), against $n$. The slider sets $\tau$.

# %%
AVG_BETAS = torch.linspace(0, 25, N_SWEEP).tolist()
AVG_NS = [4, 16, 64, 256]


def smallest_beta_measured(n, tau, iters=60):
    """Bisection on the worst-case values: the smallest beta whose measured error is <= tau max||v||."""
    K, V = check_inputs.worst_average_case(n, dtype=DTYPE)
    lo, hi = 0.0, 60.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if average_error(mid, K, V)[0] <= tau else (mid, hi)
    return hi


def plot_average(log10_tau=-3.0):
    tau = 10.0**log10_tau
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for n in AVG_NS:
        K, V = check_inputs.worst_average_case(n, dtype=DTYPE)
        (line,) = ax1.semilogy(AVG_BETAS, [average_error(b_, K, V)[0] for b_ in AVG_BETAS], label=f"n={n}")
        ax1.axvline(beta_needed(n, tau), ls=":", c=line.get_color())
    ax1.axhline(tau, ls="--", c="gray", label=rf"$\tau$ = {tau:g}")
    ax1.set(
        xlabel=r"$\beta$, your averaging query's score on $k_a$",
        ylabel=r"worst-case $\|c - \frac{1}{2}(v_a+v_b)\|$",
        title=r"Error vs $\beta$ (dotted: your $\beta$)",
    )
    ax1.legend(fontsize=8)
    n_max = 256 if QUICK else 1024
    ns = sorted({int(x) for x in torch.logspace(math.log10(3), math.log10(n_max), N_SWEEP // 2).tolist()})
    ax2.semilogx(ns, [smallest_beta_measured(n, tau) for n in ns], "o", ms=5, label="measured (bisection)")
    ax2.semilogx(ns, [beta_needed(n, tau) for n in ns], "-", label="your beta_needed(n, tau)")
    ax2.set(xlabel="number of keys $n$", ylabel=r"smallest $\beta$", title=rf"$\beta$ needed for $\tau$ = {tau:g}")
    ax2.legend()
    fig.tight_layout()
    return fig


save_then_explore(
    plot_average,
    "01_average_of_two",
    question="Can one query average two values, and how large must it be?",
    caption="Error ||c - (v_a + v_b)/2|| of the averaging query of Exercise 1.5 (score beta on k_a) with orthonormal "
    "keys and the worst-case values. Left: against beta for four numbers of keys n, with the beta of Exercise 1.6 "
    "dotted. Right: the smallest beta reaching the error tau, measured by bisection and from Exercise 1.6, against n.",
    log10_tau=(-8.0, -1.0, 0.5, -3.0),
)

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* Each worst-case curve is flat while the other keys hold most of the
# weight, then falls like $e^{-\beta}$, and crosses $\tau$ exactly at its dotted line. On the right the
# measured smallest $\beta$ lies on the line $\log(n-2) + \log(1/\tau - \tfrac12)$: straight on a log
# axis, so multiplying the number of keys by 4 costs about $\log 4 \approx 1.4$ more in $\beta$.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.3 (2 points).** The smallest $\beta$ itself is graded once, by Exercise 1.6's check; this
# rubric grades the reasoning that leads to it.
# - **2 points:** $\alpha_a = \alpha_b = e^\beta/(2e^\beta + n - 2)$ and $1/(2e^\beta + n - 2)$ for the others;
#   $c - m = \varepsilon(\bar v_{\text{rest}} - m)$ with $\varepsilon = (n-2)/(2e^\beta + n - 2)$; why the worst case is
#   $2\varepsilon\max_i\lVert v_i\rVert$ (which values reach it); so $\beta$ grows logarithmically in $n$.
# - **1 point:** the weights and the error right, without the worst case or without how $\beta$ grows with $n$.
# - **0 points:** weights that leave out the $n - 2$ other keys, or a $\beta$ said not to depend on $n$.
#
# *Key phrases:* "2e^\beta + n - 2", "\log\!\big((n-2)", "logarithmically"

# %% [markdown]
# ## 4. Recovering $v_a$ from a sum
#
# Attention often hands the next layer a *sum* $s = v_a + v_b$. Can a linear map take $v_a$ back out of it?
# Suppose every $v_a$ lives in a subspace
# $\mathcal{A}$ with orthonormal basis $A \in \mathbb{R}^{d\times p}$ (columns), every $v_b$ in a
# subspace $\mathcal{B}$ with orthonormal basis $B \in \mathbb{R}^{d\times r}$. Below, in $\mathbb{R}^8$:
# `basis_A` spans $\mathcal{A}$ ($p = 3$), `W4` spans a $\mathcal{B}$ orthogonal to it ($r = 2$,
# $A^\top B = 0$), and `tilted_basis(theta)` tilts $\mathcal{B}$ towards $\mathcal{A}$:
# $B_\theta = \sin\theta\,W + \cos\theta\,A_{:,1:r}$, with $\theta = 90°$ the orthogonal case.

# %% tags=["verifier"]
D4, P4, R4 = 8, 3, 2  # ambient dimension, dim of subspace A, dim of subspace B (R4 <= P4)
U4 = orthonormal_vectors(D4, D4, rng(4), dtype=DTYPE)  # (8, 8) orthonormal rows
basis_A = U4[:P4].T  # (8, 3) columns span A
W4 = U4[P4 : P4 + R4].T  # (8, 2) orthogonal to A


def tilted_basis(theta):
    """Orthonormal basis of a subspace B at principal angle theta from A (theta = pi/2: orthogonal)."""
    return math.sin(theta) * W4 + math.cos(theta) * basis_A[:, :R4]  # (8, 2)


# %% [markdown]
# ### Exercise 1.7 · A map that recovers $v_a$ (2 points)
#
# Design a $(d, d)$ matrix $M$ with $Ms = v_a$ for every $s = v_a + v_b$, $v_a$ in $\mathcal{A}$ and $v_b$ orthogonal
# to it, for a subspace $\mathcal{A}$ given by *any* matrix whose columns span it: a layer's weights are rarely
# orthonormal. The check asks what your $M$ *does*: given an orthonormal basis of $\mathcal{A}$, and then columns
# that span the same $\mathcal{A}$ but are neither orthogonal nor of unit length, it must give back $v_a$ from
# $v_a + v_b$ for random vectors, with $v_b$ anywhere orthogonal to $\mathcal{A}$. The experiment below uses your $M$.


# %%
def recovering_map(A):
    """The (d, d) matrix M with M s = v_a whenever s = v_a + v_b, v_a in the span of A's columns, v_b orthogonal to it.

    A: (d, p); its p columns span the subspace but need not be orthonormal (nor of unit length).
    """
    # BEGIN SOLUTION
    Q, _ = torch.linalg.qr(A)  # (d, p) orthonormal columns with the same span as A's
    return Q @ Q.T  # (d, d): the orthogonal projector onto the span
    # END SOLUTION


def recovery_errors(basis_A, basis_B, n_vectors=1_000, seed=SEED):
    """Relative errors ||M s - v_a|| / ||v_b|| over random v_a in A, v_b in B, with M = recovering_map(basis_A)."""
    g = torch.Generator().manual_seed(seed)
    v_a = torch.randn(n_vectors, basis_A.shape[1], generator=g, dtype=DTYPE) @ basis_A.T  # (N, d)
    v_b = torch.randn(n_vectors, basis_B.shape[1], generator=g, dtype=DTYPE) @ basis_B.T  # (N, d)
    recovered = (v_a + v_b) @ recovering_map(basis_A).T  # rows are M s
    return (recovered - v_a).norm(dim=-1) / v_b.norm(dim=-1)


# %% tags=["check"]
def check_recovering_map(map_fn, n_vectors=200, seed=SEED):
    """M must give back v_a from v_a + v_b, v_b anywhere orthogonal to A, for an orthonormal basis and for another one."""
    g = torch.Generator().manual_seed(seed)
    complement = U4[P4:].T  # (8, 5): all of A's orthogonal complement
    mixing = torch.randn(P4, P4, generator=g, dtype=DTYPE) + 3 * torch.eye(P4, dtype=DTYPE)  # invertible
    for name, A in [
        ("an orthonormal basis", basis_A),
        ("columns that span A but are not orthonormal", basis_A @ mixing),
    ]:
        M = map_fn(A)
        assert tuple(M.shape) == (D4, D4), f"{name}: M has shape {tuple(M.shape)}; it acts on R^{D4}: ({D4}, {D4})"
        v_a = torch.randn(n_vectors, P4, generator=g, dtype=DTYPE) @ basis_A.T  # (N, 8) in A
        v_b = torch.randn(n_vectors, D4 - P4, generator=g, dtype=DTYPE) @ complement.T  # (N, 8) orthogonal to A
        miss = ((v_a + v_b) @ M.T - v_a).norm(dim=-1).max().item()
        assert miss < 1e-10, f"{name}: M s differs from v_a: ||M s - v_a|| reaches {miss:.2e} (tolerance 1e-10)"


def check_recover(basis_A, basis_B, tol=1e-10):
    errors = recovery_errors(basis_A, basis_B)
    assert errors.max() < tol, f"M s differs from v_a by {errors.max():.2e} of ||v_b||: are the subspaces orthogonal?"


def probe_recovering_map(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_recovering_map, fn, seed=seed)


def verify_recovering_map(results, seed=SEED):
    """M applied to sums drawn again from `seed`, here."""
    probes.replay(check_recovering_map, results, seed=seed)


verify_recovering_map(probe_recovering_map(recovering_map))
check_recover(basis_A, W4)

# %% [markdown]
# #### Why your map works, and when it fails

# %% [markdown] tags=["question"]
# **Question 1.4 (2 points).** Why does your $M$ work? For an orthonormal basis $A$ of $\mathcal{A}$ and
# $A^\top B = 0$, prove that it gives $Ms = v_a$ for every $s = v_a + v_b$. If instead $\mathcal{B}$ is tilted
# towards $\mathcal{A}$ by the angle $\theta$ (`tilted_basis(theta)`), how large is the error
# $\lVert Ms - v_a\rVert$, relative to $\lVert v_b\rVert$?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: one v_a in A, one v_b in B, and your M.
g_try = torch.Generator().manual_seed(40)
v_a_try = basis_A @ torch.randn(P4, generator=g_try, dtype=DTYPE)  # (8,) in A
v_b_try = W4 @ torch.randn(R4, generator=g_try, dtype=DTYPE)  # (8,) in B
M_try = recovering_map(basis_A)
print(f"||M s - v_a|| / ||v_b|| = {(M_try @ (v_a_try + v_b_try) - v_a_try).norm() / v_b_try.norm():.3e}")

# %% [markdown] tags=["answer"]
# **Model answer.** $M = AA^\top$ (the solution of Exercise 1.7 orthonormalises the columns first), the orthogonal
# projector onto $\mathcal{A}$. Write $v_a = Ax$ and
# $v_b = By$:
#
# $$Ms = AA^\top A x + AA^\top B y = A(I)x + A(0)y = v_a .$$
#
# If the subspaces are not orthogonal the leak $AA^\top v_b$ survives. With
# $B_\theta = \sin\theta\,W + \cos\theta\,A_{:,1:r}$ ($W$ orthonormal and orthogonal to $A$), the leak is
# $AA^\top B_\theta y = \cos\theta\,A_{:,1:r}\,y$, so $\lVert Ms - v_a\rVert / \lVert v_b\rVert = |\cos\theta|$
# exactly: $M$ recovers $v_a$ only as well as the subspaces are separated. When the columns of $A$ span
# $\mathcal{A}$ without being orthonormal, the projector is $A(A^\top A)^{-1}A^\top$ (or $QQ^\top$ with
# $Q$ from a QR decomposition of $A$).

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.4 (2 points).**
# - **2 points:** $M = AA^\top$, the orthogonal projector onto $\mathcal{A}$, proved from $A^\top A = I$ and
#   $A^\top B = 0$; tilted, the leak is $AA^\top B_\theta y = \cos\theta\,A_{:,1:r}\,y$, so the relative error is
#   $|\cos\theta|$ exactly, for every $v_b$.
# - **1 point:** the projector and its proof with a wrong or missing tilt error ($\sin\theta$, "small"), or
#   |cos theta| without the proof.
# - **0 points:** $M = A^\top A$, the identity, or an $M$ that needs $v_b$.
#
# *Key phrases:* "AA^\top", "|\cos\theta|", "|cos theta|"

# %% [markdown]
# **The figure.** The relative recovery error with your $M$ against the angle $\theta$ between the subspaces
# (`tilted_basis(theta)`): each dot is the mean over random vectors $v_a$, $v_b$.

# %%
angles = torch.linspace(0, math.pi / 2, N_SWEEP).tolist()
print(f"orthogonal subspaces: worst relative error {recovery_errors(basis_A, W4).max():.1e}")
tilted_errors = [recovery_errors(basis_A, tilted_basis(t), n_vectors=200) for t in angles]
leak = [e.mean().item() for e in tilted_errors]
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.plot([math.degrees(t) for t in angles], leak, "o-", ms=4, label=r"measured $\|Ms - v_a\| / \|v_b\|$ (mean)")
ax.set(
    xlabel=r"angle $\theta$ between subspaces $\mathcal{A}$ and $\mathcal{B}$ (degrees)",
    ylabel="relative error",
    title=r"Recovering $v_a$ from $v_a + v_b$ with your $M$",
)
ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "01_subspace_recovery",
    question="How well does your M recover v_a from v_a + v_b when the subspace of v_b tilts towards that of v_a?",
    caption="Relative recovery error ||M s - v_a|| / ||v_b|| of the M of Exercise 1.7 against the angle theta between "
    "the subspaces of v_a and v_b, the mean over random vectors at each angle.",
    numbers={"worst error at 90 degrees": recovery_errors(basis_A, W4).max(), "mean error at 0 degrees": leak[0]},
)
plt.show()
for i in range(0, len(angles), max(1, len(angles) // 6)):
    print(
        f"theta = {math.degrees(angles[i]):5.1f} degrees: relative error {leak[i]:.6f} on average, "
        f"{tilted_errors[i].std():.1e} standard deviation over the vectors"
    )

# %% [markdown] tags=["answer"]
# #### Model answer, measured: the leak against $|\cos\theta|$


# %% tags=["answer"]
def check_leak_formula(theta):
    errors = recovery_errors(basis_A, tilted_basis(theta))
    assert torch.allclose(errors, torch.full_like(errors, abs(math.cos(theta))), atol=1e-10), (
        "leak differs from |cos theta|"
    )


for t in angles:
    check_leak_formula(t)
print(
    f"largest gap between the measured error and |cos theta| over {len(angles)} angles: "
    f"{max(abs(x - abs(math.cos(t))) for x, t in zip(leak, angles)):.1e}"
)

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* The error falls from $1$ at $\theta = 0$ (the subspaces overlap: all of
# $v_b$ leaks) to $0$ at $90°$ along $|\cos\theta|$, for every vector drawn (the spread over vectors is at
# rounding level): the cell above checks it at every angle.

# %% [markdown]
# ## 5. One head, keys that are not exact
#
# Keys are rarely exact. Let the means $\mu_1,\dots,\mu_n$ be orthonormal and draw
# $k_i \sim \mathcal{N}(\mu_i, \alpha I)$ with a vanishingly small $\alpha$ (here $\alpha$ is a
# variance, not an attention weight). A query can only be built from what is known in advance, the means.
#
# `sample_keys` in `helpers.nn.attention` draws such keys: `covariance="isotropic"` is
# $\Sigma_i = \alpha I$ (and `"item5"`, used below, stretches key $a$). The values are
# orthonormal, so $c \cdot v_i$ reads off the weight on key $i$.

# %% tags=["verifier"]
from helpers.nn.attention import sample_keys

N_KEYS, D5, BETA, LOG10_ALPHA = 8, 16, 10.0, -6.0
A_IDX, B_IDX = 0, 1
mu = orthonormal_vectors(N_KEYS, D5, rng(5), dtype=DTYPE)  # (n, d) orthonormal means
V5 = orthonormal_vectors(N_KEYS, N_KEYS, rng(50), dtype=DTYPE)  # (n, n) orthonormal values: c . v_i reads off weight i


def total_variance(c):
    """tr Cov(c) = E ||c - E c||^2 over the Monte Carlo draws (rows of c)."""
    return c.var(dim=0).sum().item()


def draw_keys(covariance, log10_alpha=LOG10_ALPHA, n_samples=N_MC, seed=5):
    return sample_keys(mu, 10.0**log10_alpha, n_samples, rng(seed), covariance=covariance, a=A_IDX)  # (S, n, d)


# %% [markdown]
# ### Exercise 1.8 · One query from the means (1 point)
#
# Design one query, built from the means $\mu_i$ alone and with score $\beta$ on $\mu_a$ ($\mu_a^\top q = \beta$),
# for which attention over keys drawn close to their means ($\Sigma_i = \alpha I$) returns about
# $\tfrac12(v_a + v_b)$. The check draws such keys and asks, at $\beta = 10$, that every draw of $c$ lie within
# $0.05$ of $\tfrac12(v_a + v_b)$ and that $\operatorname{tr}\operatorname{Cov}(c)$ stay below $10^{-3}$, for two pairs
# $a, b$. Everything in items 5 and 6 uses your query: it is *the single head*.


# %%
def single_head_query(mu, a, b, beta):
    """One query (d,) from the orthonormal means mu (n, d), with score beta on mu_a (mu[a] @ q == beta), for which
    attention over keys drawn close to their means returns about (v_a + v_b) / 2."""
    # BEGIN SOLUTION
    return averaging_query(mu, a, b, beta)  # the means are orthonormal: item 3's query, built from them
    # END SOLUTION


def single_head(keys, beta=BETA):
    """Your single-head query against each draw of the keys (S, n, d). Returns c (S, n) and alpha (S, n)."""
    q = single_head_query(mu, A_IDX, B_IDX, beta)  # (d,), broadcast over the S draws
    return attend(q, keys, V5)


# %% tags=["check"]
def check_single_head_query(query_fn, beta=BETA, seed=SEED):
    """Isotropic keys close to their means: every draw of c near (v_a + v_b)/2 for query_fn(mu, a, b, beta)."""
    keys = draw_keys("isotropic", n_samples=500, seed=51 + seed)
    for a, b in [(A_IDX, B_IDX), (N_KEYS - 1, 2)]:
        q = query_fn(mu, a, b, beta)
        assert tuple(q.shape) == (D5,), f"a={a}, b={b}: the query has shape {tuple(q.shape)}, not ({D5},)"
        c, alpha = attend(q, keys, V5)
        worst = (c - (V5[a] + V5[b]) / 2).norm(dim=-1).max()
        assert worst < 0.05, (
            f"a={a}, b={b}, beta={beta:g}: some draw of c is {worst:.3f} away from (v_a + v_b)/2 (mean weights on a "
            f"and b: {alpha[:, a].mean():.3f}, {alpha[:, b].mean():.3f})"
        )
        assert total_variance(c) < 1e-3, f"a={a}, b={b}: tr Cov(c) = {total_variance(c):.2e}, not below 1e-3"
        assert abs(mu[a] @ q - beta) <= 1e-9 * beta, f"a={a}, b={b}: the score on mu_a is {mu[a] @ q:.6g}, not {beta:g}"


def probe_single_head_query(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_single_head_query, fn, seed=seed)


def verify_single_head_query(results, seed=SEED):
    """The check again, on the queries your function returned: attention computed here."""
    probes.replay(check_single_head_query, results, seed=seed)


verify_single_head_query(probe_single_head_query(single_head_query))

# %% [markdown]
# #### One head, and a key whose length varies
#
# Now let key $a$ vary in *length*: $\Sigma_a = \alpha I + \tfrac12\mu_a\mu_a^\top$. `draw_keys("item5")` stretches key
# $a$ so, adding $g\,\mu_a$ with $g \sim \mathcal{N}(0, \tfrac12)$ (whose covariance is $\tfrac12\mu_a\mu_a^\top$).


# %% [markdown] tags=["question"]
# **Question 1.5 (2 points).** With key $a$ stretched ($\Sigma_a = \alpha I + \tfrac12\mu_a\mu_a^\top$) and your
# single-head query with a large $\beta$, what does $c$ do over the draws of the keys?
# Derive $\alpha_a$ as a function of the length of $k_a$ along $\mu_a$, and estimate the total variance
# $\operatorname{tr}\operatorname{Cov}(c)$ for large $\beta$.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: alpha_a over the first draws of the stretched keys.
keys_try = draw_keys("item5", n_samples=200)
c_try, alpha_try = single_head(keys_try)
print("alpha_a over 10 draws:", [round(a, 3) for a in alpha_try[:10, A_IDX].tolist()])
print(f"tr Cov(c) over 200 draws: {total_variance(c_try):.3f}")

# %% [markdown] tags=["answer"]
# **Model answer.** The single-head query is $q = \beta(\mu_a + \mu_b)$ (the solution of Exercise 1.8).
# Along $\mu_a$ the variance is now $\alpha + \tfrac12$, so $k_a \approx \gamma\,\mu_a$
# with $\gamma \sim \mathcal{N}(1, \tfrac12)$: same direction, random length. The scores become
# $\beta\gamma$ for $a$, $\beta$ for $b$, about $0$ for the rest, so for large $\beta$
#
# $$\alpha_a \approx \frac{e^{\beta\gamma}}{e^{\beta\gamma} + e^{\beta}} = \sigma\big(\beta(\gamma - 1)\big).$$
#
# When $k_a$ comes out longer than average ($\gamma > 1$, half the time) $c \approx v_a$; when shorter,
# $c \approx v_b$. The output swings between the two instead of averaging them. With orthonormal
# values, $c \approx \alpha_a v_a + (1-\alpha_a) v_b$, so its total variance
# $\operatorname{tr}\operatorname{Cov}(c) = \mathbb{E}\lVert c - \mathbb{E}c\rVert^2 \approx
# \operatorname{Var}(\alpha_a)\,\lVert v_a - v_b\rVert^2$, which tends to $\tfrac14\cdot 2 = \tfrac12$ as $\beta$ grows
# and the switch becomes a coin flip (at $\beta = 10$ it is about $0.4$).

# %%
keys_iso, keys_stretch = draw_keys("isotropic"), draw_keys("item5")
c_iso, alpha_iso = single_head(keys_iso)
c_single, alpha_single = single_head(keys_stretch)
print(f"isotropic keys:   tr Cov(c) = {total_variance(c_iso):.2e}   mean alpha_a = {alpha_iso[:, A_IDX].mean():.3f}")
print(
    f"key a stretched:  tr Cov(c) = {total_variance(c_single):.2e}   "
    f"fraction with alpha_a > 0.9: {(alpha_single[:, A_IDX] > 0.9).double().mean():.2f}, "
    f"with alpha_a < 0.1: {(alpha_single[:, A_IDX] < 0.1).double().mean():.2f}"
)
if QUICK:
    print(
        f"(quick mode: {N_MC:,} key draws; these fractions carry about +-{0.5 / math.sqrt(N_MC):.2f} of sampling noise)"
    )

# %% [markdown]
# **The figure.** Left: the histogram of $\alpha_a$ over key draws, for isotropic keys and with key $a$
# stretched. Right: each draw's $c$ projected on $v_a$ and $v_b$. Try the sliders: $\beta$ sets how
# sharp the scores are, $\alpha$ how much every key jitters.


# %%
def plot_single_head(beta=BETA, log10_alpha=LOG10_ALPHA):
    c_i, a_i = single_head(draw_keys("isotropic", log10_alpha), beta)
    c_s, a_s = single_head(draw_keys("item5", log10_alpha), beta)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    bins = torch.linspace(0, 1, 41).tolist()
    ax1.hist(
        a_i[:, A_IDX].numpy(), bins=bins, alpha=0.7, label=f"isotropic keys (tr Cov c = {total_variance(c_i):.1e})"
    )
    ax1.hist(
        a_s[:, A_IDX].numpy(), bins=bins, alpha=0.7, label=f"key $a$ stretched (tr Cov c = {total_variance(c_s):.2f})"
    )
    ax1.set(
        xlabel=r"$\alpha_a$",
        ylabel="number of key draws",
        title=rf"Single head (Exercise 1.8), $\beta$={beta:g}",
    )
    ax1.legend(fontsize=8)
    ax2.scatter((c_s @ V5[A_IDX]).numpy(), (c_s @ V5[B_IDX]).numpy(), s=6, alpha=0.3, c="C1", label="key $a$ stretched")
    ax2.scatter(
        (c_i @ V5[A_IDX]).numpy(),
        (c_i @ V5[B_IDX]).numpy(),
        s=40,
        c="C0",
        edgecolors="k",
        zorder=4,
        label="isotropic keys",
    )
    ax2.scatter([1, 0, 0.5], [0, 1, 0.5], marker="x", c="k", s=60, zorder=3)
    for xy, text in [((1, 0), "$v_a$"), ((0, 1), "$v_b$"), ((0.5, 0.5), r"$\frac{1}{2}(v_a+v_b)$")]:
        ax2.annotate(text, xy, textcoords="offset points", xytext=(6, 6))
    ax2.set(
        xlabel=r"$c \cdot v_a$",
        ylabel=r"$c \cdot v_b$",
        title=rf"Where $c$ lands ($\alpha$=1e{log10_alpha:g})",
        xlim=(-0.1, 1.2),
        ylim=(-0.1, 1.2),
    )
    ax2.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


save_then_explore(
    plot_single_head,
    "01_single_head_stretched_key",
    question="What does one head do when a key's length varies?",
    caption="One head, the query of Exercise 1.8. Left: histogram of alpha_a over key draws, isotropic keys "
    "and key a stretched. Right: where the output c lands in the (v_a, v_b) plane.",
    beta=(1.0, 20.0, 0.5, BETA),
    log10_alpha=(-8.0, -1.0, 0.5, LOG10_ALPHA),
)


# %% tags=["answer"]
# The solved notebook's checks of what Question 1.5 asks (the student copy leaves them out).
def check_single_head_averages(c, tol=0.05):
    """Isotropic keys: every draw of c is close to (v_a + v_b)/2 and c barely varies."""
    m = (V5[A_IDX] + V5[B_IDX]) / 2
    worst = (c - m).norm(dim=-1).max()
    assert worst < tol, f"some draw of c is {worst:.3f} away from (v_a+v_b)/2"
    assert total_variance(c) < 1e-3, f"tr Cov(c) = {total_variance(c):.2e} is not small"


def check_single_head_swings(c):
    """Stretched key a: c is large-variance and bimodal, near v_a in many draws and near v_b in many."""
    near_a = ((c - V5[A_IDX]).norm(dim=-1) < 0.1).double().mean()
    near_b = ((c - V5[B_IDX]).norm(dim=-1) < 0.1).double().mean()
    assert total_variance(c) > 0.1, f"tr Cov(c) = {total_variance(c):.2e}: c does not swing"
    assert near_a > 0.25 and near_b > 0.25, (
        f"c is near v_a in {near_a:.0%} and near v_b in {near_b:.0%} of draws: not bimodal"
    )


check_single_head_averages(c_iso)
check_single_head_swings(c_single)

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* Isotropic keys give a spike of $\alpha_a$ at $\tfrac12$ and every $c$
# at the midpoint; the stretched key gives two spikes, at $0$ and $1$, and $c$ lands at $v_a$ or at
# $v_b$. A smaller $\beta$ softens the switch ($\sigma(\beta(\gamma-1))$ flattens); a larger $\alpha$
# spreads even the isotropic case.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.5 (2 points).**
# - **2 points:** $k_a \approx \gamma\mu_a$ with $\gamma \sim \mathcal{N}(1, \tfrac12)$; the scores $\beta\gamma$ and
#   $\beta$ give $\alpha_a \approx \sigma(\beta(\gamma - 1))$; so $c$ is bimodal, near v_a when $k_a$ comes out long
#   and near $v_b$ when short, about half the draws each; and
#   $\operatorname{tr}\operatorname{Cov}(c) \approx \operatorname{Var}(\alpha_a)\lVert v_a - v_b\rVert^2 \to \tfrac12$ (about
#   $0.4$ at $\beta = 10$).
# - **1 point:** the swing between $v_a$ and $v_b$ without $\alpha_a$ or the variance, or $\alpha_a$ without
#   where $c$ lands.
# - **0 points:** $c$ stays near $\tfrac12(v_a + v_b)$, or a variance of the order of $\alpha$.
#
# *Key phrases:* "bimodal", "near v_a", "coin flip", "\sigma\big(\beta(\gamma - 1)\big)"

# %% [markdown]
# ## 6. Two heads
#
# Split the job between two heads over the same keys and values: head 1 with query $q_1$, head 2 with
# $q_2$, and $c = \tfrac12(c_1 + c_2)$. `two_heads` computes that for any two queries.


# %%
def two_heads(keys, q1, q2):
    """c = (c1 + c2) / 2 for two heads over the same keys (S, n, d). Returns c (S, n), alpha1, alpha2."""
    c1, alpha1 = attend(q1, keys, V5)
    c2, alpha2 = attend(q2, keys, V5)
    return (c1 + c2) / 2, alpha1, alpha2


# %% [markdown] tags=["question"]
# **Question 1.6 (2 points).** Choose $q_1$ and $q_2$ (in terms of the $\mu_i$ and $\beta$) so that
# $c \approx \tfrac12(v_a + v_b)$ with isotropic keys. Does your choice survive the stretched key $a$
# of Question 1.5? Explain why, estimate how often it still fails (for $n = 8$ keys and $\beta = 10$),
# and say whether that is rare.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the single head's query used twice (edit q1_try, q2_try).
q1_try = q2_try = single_head_query(mu, A_IDX, B_IDX, BETA)
c_try, _, _ = two_heads(keys_stretch, q1_try, q2_try)
print(f"stretched key a: tr Cov(c) = {total_variance(c_try):.3f}, mean c . v_a = {(c_try @ V5[A_IDX]).mean():.3f}")

# %% [markdown] tags=["answer"]
# **Model answer.** $q_1 = \beta\mu_a$ and $q_2 = \beta\mu_b$: head 1 copies $v_a$ and head 2 copies
# $v_b$ (item 2), so $c \approx \tfrac12(v_a + v_b)$. Head 2 never looks at $k_a$:
# $q_2^\top k_a \approx \beta\gamma\,\mu_b^\top\mu_a = 0$, so $c_2 \approx v_b$ always. Head 1 scores $k_a$
# at $\beta\gamma$ against about $0$ for the $n-1$ others:
#
# $$\alpha^{(1)}_a \approx \frac{e^{\beta\gamma}}{e^{\beta\gamma} + n - 1},$$
#
# which stays near $1$ *whatever the length of $k_a$*, as long as $\beta\gamma \gg \log(n-1)$. Each
# head compares its key only with keys that score about $0$, instead of racing two noisy keys
# against each other. Two heads do not remove the variance completely: when $k_a$ shrinks below
# $\gamma < \log(n-1)/\beta$ (or flips sign), head 1 loses $v_a$, with probability
# $\Phi\big((\log(n-1)/\beta - 1)/\sqrt{1/2}\big)$. For $n = 8$ and $\beta = 10$ that is $12.7\,\%$: about
# one draw in eight, not a tail event, but far from the single head's coin flip, and the total
# variance still falls by more than an order of magnitude. The sentences printed after the figure of
# Exercise 1.9 give this run's rate and factor.

# %% [markdown]
# ### Exercise 1.9 · Two queries, two heads (1 point)
#
# Write the two queries of Question 1.6. The check asks that, with isotropic keys, the two heads
# average, and that with key $a$ stretched your two heads' $\operatorname{tr}\operatorname{Cov}(c)$ is at least 5 times
# smaller than your single head's. The cell prints this run's numbers for your answer.


# %%
def two_head_queries(mu, a, b, beta):
    """q1, q2 (each (d,)) for two heads whose average c = (c1 + c2)/2 is about (v_a + v_b)/2.

    mu: (n, d) the orthonormal means of the keys; a, b: the two keys to average; beta: the queries' scale.
    """
    # BEGIN SOLUTION
    return beta * mu[a], beta * mu[b]  # head 1 copies v_a, head 2 copies v_b (item 2)
    # END SOLUTION


q1, q2 = two_head_queries(mu, A_IDX, B_IDX, BETA)
c_multi_iso, _, _ = two_heads(keys_iso, q1, q2)
c_multi, alpha1, _ = two_heads(keys_stretch, q1, q2)
print(
    f"isotropic keys: two heads tr Cov(c) = {total_variance(c_multi_iso):.2e}, "
    f"max ||c - (v_a+v_b)/2|| = {(c_multi_iso - (V5[A_IDX] + V5[B_IDX]) / 2).norm(dim=-1).max():.1e}"
)
print(f"key a stretched: tr Cov(c) one head {total_variance(c_single):.3f}, two heads {total_variance(c_multi):.3f}")

# %% [markdown]
# **The figure.** Left: the coefficient $c\cdot v_a$ over key draws, one head against two heads, with
# key $a$ stretched (log scale: the small counts show). Middle: where $c$ lands, as in item 5. Right:
# the total variance of $c$ on a log scale, for the four combinations.


# %%
def plot_multi_head(beta=BETA, log10_alpha=LOG10_ALPHA):
    keys_i, keys_s = draw_keys("isotropic", log10_alpha), draw_keys("item5", log10_alpha)
    qa, qb = two_head_queries(mu, A_IDX, B_IDX, beta)
    runs = {
        "one head, isotropic": single_head(keys_i, beta)[0],
        "two heads, isotropic": two_heads(keys_i, qa, qb)[0],
        "one head, $k_a$ stretched": single_head(keys_s, beta)[0],
        "two heads, $k_a$ stretched": two_heads(keys_s, qa, qb)[0],
    }
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4))
    bins = torch.linspace(-0.05, 1.05, 45).tolist()
    for label in ["one head, $k_a$ stretched", "two heads, $k_a$ stretched"]:
        ax1.hist((runs[label] @ V5[A_IDX]).numpy(), bins=bins, alpha=0.7, label=label)
        ax2.scatter((runs[label] @ V5[A_IDX]).numpy(), (runs[label] @ V5[B_IDX]).numpy(), s=6, alpha=0.3, label=label)
    ax1.axvline(0.5, ls="--", c="k", label="target 1/2")
    ax1.set(
        xlabel=r"$c \cdot v_a$", ylabel="number of key draws", title=rf"Coefficient of $v_a$ in $c$, $\beta$={beta:g}"
    )
    ax1.set_yscale("log")
    ax1.legend(fontsize=8)
    ax2.scatter([1, 0, 0.5], [0, 1, 0.5], marker="x", c="k", s=60, zorder=3)
    ax2.set(
        xlabel=r"$c \cdot v_a$", ylabel=r"$c \cdot v_b$", title="Where $c$ lands", xlim=(-0.1, 1.2), ylim=(-0.1, 1.2)
    )
    ax2.legend(fontsize=8, loc="upper right")
    variances = [max(total_variance(c), 1e-16) for c in runs.values()]
    ax3.bar(range(4), variances, color=["C2", "C3", "C0", "C1"])
    ax3.set_yscale("log")
    ax3.set_xticks(range(4), [label.replace(", ", ",\n") for label in runs], fontsize=8)
    ax3.set(ylabel=r"tr Cov$(c)$", title="Total variance of $c$ over key draws")
    fig.tight_layout()
    return fig


save_then_explore(
    plot_multi_head,
    "01_multi_head_variance",
    question="With key a stretched, how do one head and two heads compare?",
    caption="One head against the two heads of Exercise 1.9 with key a stretched: the coefficient of v_a in c "
    "(left), where c lands (middle) and the total variance of c over key draws (right, log scale).",
    beta=(1.0, 20.0, 0.5, BETA),
    log10_alpha=(-8.0, -1.0, 0.5, LOG10_ALPHA),
)


# %% tags=["check"]
def check_averages(c, tol=0.05):
    """Every draw of c must lie within tol of (v_a + v_b)/2, and tr Cov(c) stay below 1e-3."""
    m = (V5[A_IDX] + V5[B_IDX]) / 2
    worst = (c - m).norm(dim=-1).max()
    assert worst < tol, f"some draw of c is {worst:.3f} away from (v_a+v_b)/2"
    assert total_variance(c) < 1e-3, f"tr Cov(c) = {total_variance(c):.2e}, not below 1e-3"


def check_multi_head(keys, q1, q2, factor=5.0):
    """Two heads (q1, q2) must cut tr Cov(c) by `factor` against your single head (Exercise 1.8)."""
    single = total_variance(single_head(keys)[0])
    multi = total_variance(two_heads(keys, q1, q2)[0])
    assert multi * factor < single, (
        f"two heads: tr Cov(c) = {multi:.3f}, single head {single:.3f}: less than {factor:g}x smaller"
    )


def check_two_heads(queries_fn, seed=SEED):
    """queries_fn(mu, a, b, beta) -> q1, q2: with isotropic keys the two heads average; with key a stretched they
    cut tr Cov(c) against the single head (keys drawn from `seed`)."""
    q1, q2 = queries_fn(mu, A_IDX, B_IDX, BETA)
    check_averages(two_heads(draw_keys("isotropic", seed=5 + seed), q1, q2)[0])
    check_multi_head(draw_keys("item5", seed=5 + seed), q1, q2)


def probe_two_heads(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_two_heads, fn, seed=seed)


def verify_two_heads(results, seed=SEED):
    """The check again, on the queries your function returned: attention computed here."""
    probes.replay(check_two_heads, results, seed=seed)


verify_two_heads(probe_two_heads(two_head_queries))

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* With one head the coefficient of $v_a$ is $0$ or $1$; with two heads it
# sits at the target $\tfrac12$ except in the tail of draws where $k_a$ nearly vanishes. Isotropic keys
# give almost no variance either way; with the stretched key, two heads cut it by more than an order
# of magnitude.

# %% [markdown] tags=["answer"]
# #### Model answer, measured: the verdicts of this run


# %% tags=["answer"]
# The solved notebook's sentences, computed from the numbers printed under Exercise 1.9 and from the
# failure rate measured here (the student copy prints neither the rate nor the sentences).
miss_rate = (alpha1[:, A_IDX] < 0.5).double().mean().item()
print(f"alpha1_a < 1/2 in {miss_rate:.1%} of {N_MC:,} draws (+-{math.sqrt(miss_rate * (1 - miss_rate) / N_MC):.1%})")


def compare_heads(single, multi):
    """One sentence comparing tr Cov(c) of one head and of two heads (it flips if the numbers do)."""
    if multi < single:
        ratio = single / max(multi, 1e-300)
        return f"With key a stretched, two heads cut tr Cov(c) from {single:.3f} to {multi:.3f}, {ratio:.0f}x smaller."
    return f"With key a stretched, two heads do NOT reduce tr Cov(c): {multi:.3f} against {single:.3f} for one head."


def describe_miss_rate(rate, n_draws):
    """How often head 1 loses v_a, in words chosen from the measured rate (and its sampling noise)."""
    noise = math.sqrt(max(rate * (1 - rate), 1e-12) / n_draws)
    if rate < 0.05:
        verdict = "a tail event"
    elif rate < 0.35:
        verdict = f"not rare (about one draw in {1 / rate:.0f}), but far from the coin flip of one head"
    else:
        verdict = "close to a coin flip: the two heads do not help here"
    quick = f"; quick mode, {n_draws:,} draws" if QUICK else ""
    return f"Head 1 loses v_a (alpha1_a < 1/2) in {rate:.1%} of draws (+-{noise:.1%}{quick}): {verdict}."


print(compare_heads(total_variance(c_single), total_variance(c_multi)))
print(describe_miss_rate(miss_rate, N_MC))

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.6 (2 points).**
# - **2 points:** $q_1 = \beta\mu_a$, $q_2 = \beta\mu_b$; head 2 never looks at $k_a$ ($\mu_b^\top\mu_a = 0$) and
#   head 1 compares $\beta\gamma$ with about $0$ for the $n - 1$ others, so $\alpha^{(1)}_a$ stays near 1 whatever
#   the length of $k_a$, unless $\beta\gamma < \log(n-1)$: probability
#   $\Phi\big((\log(n-1)/\beta - 1)/\sqrt{1/2}\big) \approx 12.7\,\%$ for $n = 8$, $\beta = 10$, one draw in eight:
#   not rare, but far from one head's coin flip.
# - **1 point:** the right queries and why they survive, with no failure rate, a rate off by a factor of ten,
#   or failures called negligible.
# - **0 points:** the single head's query twice, or queries that each look at both keys.
#
# *Key phrases:* "\beta\mu_a", "12.7", "not rare", "one draw in eight"

# %% [markdown]
# ## 7. Key, query and value projections in self-attention
#
# In self-attention the inputs $x_1, \dots, x_T$ are keys, queries and values at once. Let
# $u_a, u_b, u_c, u_d$ be mutually orthogonal with norm $\beta$ (large), and
#
# $$x_1 = u_d + u_b, \qquad x_2 = u_a, \qquad x_3 = u_c + u_b .$$
#
# `self_attend` computes self-attention with weight matrices in row form (queries `X @ Wq`, ...);
# `coords` reads a vector's coordinates in the basis $(u_a, u_b, u_c, u_d)$.


# %% tags=["verifier"]
def self_attend(X, Wq, Wk, Wv, scale=1.0):
    """Every row of X (T, d_model) attends to every row: queries X Wq, keys X Wk, values X Wv."""
    return attend(scale * (X @ Wq), X @ Wk, X @ Wv)  # (T, d_v), (T, T)


BETA7 = 6.0
u_a, u_b, u_c, u_d = BETA7 * orthonormal_vectors(4, 8, rng(7), dtype=DTYPE)  # four orthogonal (8,) vectors of norm beta
U7 = torch.stack([u_a, u_b, u_c, u_d])


def coords(c):
    """Coordinates of c in the basis u_a, u_b, u_c, u_d (c = sum_k coords_k u_k)."""
    return c @ U7.T / BETA7**2


X7 = torch.stack([u_d + u_b, u_a, u_c + u_b])  # (3, 8): x1, x2, x3
I8 = torch.eye(8, dtype=DTYPE)
variants = {
    "x2 = u_a": u_a,
    "x2 = u_a + u_c": u_a + u_c,
    "x2 = u_a + u_d": u_a + u_d,
    "x2 = u_a + u_c + u_d": u_a + u_c + u_d,
}


def c2_no_projection(x2):
    X = torch.stack([X7[0], x2, X7[2]])
    return self_attend(X, I8, I8, I8)[0][1]


# %% [markdown] tags=["question"]
# **Question 1.7 (3 points).** (i) Without projections ($q_i = k_i = v_i = x_i$), what is $c_2$? Can adding
# multiples of $u_d$ or $u_c$ to $x_2$ make $c_2 \approx u_b$? Prove your answer for any multiples.
# (ii) Find matrices $V, K, Q$, with $v_i = Vx_i$, $k_i = Kx_i$, $q_i = Qx_i$, that give
# $c_2 \approx u_b$ and $c_1 \approx u_b - u_c$.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: c2 without projections, for four ways of padding x2.
for name, x2 in variants.items():
    print(
        f"{name:22s} c2 in (u_a, u_b, u_c, u_d): {[round(v, 3) + 0.0 for v in coords(c2_no_projection(x2)).tolist()]}"
    )

# %% [markdown] tags=["answer"]
# **Model answer (i).** $x_2 = u_a$ is orthogonal to $x_1$ and $x_3$, so its scores are
# $(0, \beta^2, 0)$. The query attends to *itself* and $c_2 \approx x_2 = u_a$. Adding
# $s\,u_c + t\,u_d$ to $x_2$ (any real $s, t$) gives scores $x_2^\top x_1 = t\beta^2$,
# $x_2^\top x_2 = (1 + s^2 + t^2)\beta^2$ and $x_2^\top x_3 = s\beta^2$. The self-score beats the other
# two by $(1 - t + t^2 + s^2)\beta^2$ and $(1 - s + s^2 + t^2)\beta^2$, both at least $\tfrac34\beta^2$
# (since $1 - s + s^2 \ge \tfrac34$). So $c_2 \approx x_2$, which still contains $u_a$ and never equals
# $u_b$. Without projections a token mostly attends to itself.

# %% [markdown] tags=["answer"]
# **Model answer (ii).** Choose what each role sees. Values keep $u_b$ and flip $u_c$:
# $V = (u_bu_b^\top - u_cu_c^\top)/\beta^2$, so $v_1 = u_b$, $v_2 = 0$, $v_3 = u_b - u_c$. Keys stay as
# they are, $K = I$. Queries route $x_2 \mapsto u_d$ (which only $k_1$ contains) and $x_1 \mapsto u_c$
# (which only $k_3$ contains): $Q = (u_du_a^\top + u_cu_d^\top)/\beta^2$. Then $q_2 = u_d$ scores
# $(\beta^2, 0, 0)$ and $c_2 \approx v_1 = u_b$; $q_1 = u_c$ scores $(0, 0, \beta^2)$ and
# $c_1 \approx v_3 = u_b - u_c$.


# %% tags=["answer"]
# The solved notebook's check of Question 1.7 (i) (the student copy leaves it out).
def check_cannot_reach_ub(c2_of, candidates):
    """Without projections, no candidate x2 gets c2 within beta/2 of u_b."""
    for name, x2 in candidates.items():
        dist = (c2_of(x2) - u_b).norm()
        assert dist > BETA7 / 2, f"{name}: c2 is within {dist:.2e} of u_b"


check_cannot_reach_ub(c2_no_projection, variants)

# %% [markdown]
# ### Exercise 1.10 · Projections that route (2 points)
#
# Write the $Q, K, V$ of Question 1.7 (ii) as matrices acting on column vectors (`Q @ x` is a query);
# in row form the weights are their transposes, $q_i^\top = x_i^\top Q^\top$, which is how the code below
# passes them to `self_attend`. The check asks for $c_2 = u_b$ and $c_1 = u_b - u_c$ to within
# $10^{-4}\beta$ at the text's $\beta$ (6 here) and with all four $u$'s scaled by one factor between 0.75 and 1.5
# (the figure's slider reaches norms outside that range, which the check does not ask for).


# %%
def route_projections(u_a, u_b, u_c, u_d):
    """Q, K, V, each (d, d) and acting on columns, that make c2 ~ u_b and c1 ~ u_b - u_c for
    x1 = u_d + u_b, x2 = u_a, x3 = u_c + u_b (the u's mutually orthogonal, all of the same large norm)."""
    # BEGIN SOLUTION
    beta2 = u_a @ u_a  # the squared norm shared by the u's
    Q = (torch.outer(u_d, u_a) + torch.outer(u_c, u_d)) / beta2  # x2 -> u_d (only in k1), x1 -> u_c (only in k3)
    K = torch.eye(len(u_a), dtype=u_a.dtype)  # keys as they are
    V = (torch.outer(u_b, u_b) - torch.outer(u_c, u_c)) / beta2  # keep u_b, flip u_c, drop the rest
    return Q, K, V
    # END SOLUTION


Q7, K7, V7 = route_projections(u_a, u_b, u_c, u_d)
c_proj, alpha_proj = self_attend(X7, Q7.T, K7.T, V7.T)
print("attention weights (row i = query x_i):\n", alpha_proj.numpy().round(4))
print("c1 coords:", [round(v, 4) + 0.0 for v in coords(c_proj[0]).tolist()], " target u_b - u_c = [0, 1, -1, 0]")
print("c2 coords:", [round(v, 4) + 0.0 for v in coords(c_proj[1]).tolist()], " target u_b = [0, 1, 0, 0]")

# %% [markdown]
# `self_attend` is `helpers.nn.attention.self_attention` (which can rescale the scores; item 9 asks by what, and
# here we pass `scale=1.0`). The check below holds them equal.
#
# **The figure.** Left: the coordinates of $c_2$ in the basis $(u_a, u_b, u_c, u_d)$ for each way of
# padding $x_2$ without projections, then with your $V, K, Q$, then the target; below the line, $c_1$
# with your $V, K, Q$ and its target $u_b - u_c$. Right: the attention weights with your projections.
# The slider changes the norm $\beta$ of the $u$'s.


# %%
def plot_kqv(beta=BETA7):
    scale = beta / BETA7  # rescale the u's to norm beta; the projections are rebuilt for that norm
    X = scale * X7
    Q, K, V = route_projections(*(scale * U7))
    rows = {
        f"$c_2$, {name}": coords(self_attend(torch.stack([X[0], scale * x2, X[2]]), I8, I8, I8)[0][1]) / scale
        for name, x2 in variants.items()
    }
    c, alpha = self_attend(X, Q.T, K.T, V.T)
    rows["$c_2$, x2 = u_a, with V, K, Q"] = coords(c[1]) / scale
    rows["target for $c_2$: $u_b$"] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=DTYPE)
    rows["$c_1$ with V, K, Q"] = coords(c[0]) / scale
    rows["target for $c_1$: $u_b - u_c$"] = torch.tensor([0.0, 1.0, -1.0, 0.0], dtype=DTYPE)
    table = torch.stack(list(rows.values()))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [1.3, 1]})
    im = ax1.imshow(table.numpy(), cmap="RdBu", vmin=-1, vmax=1)
    for (i, j), v in zip(
        torch.cartesian_prod(torch.arange(table.shape[0]), torch.arange(4)).tolist(), table.flatten().tolist()
    ):
        ax1.text(
            j, i, f"{round(v, 2) + 0.0:.2f}", ha="center", va="center", fontsize=9, color="w" if abs(v) > 0.5 else "k"
        )
    ax1.set_xticks(range(4), ["$u_a$", "$u_b$", "$u_c$", "$u_d$"])
    ax1.set_yticks(range(len(rows)), list(rows))
    ax1.axhline(len(rows) - 2.5, color="k", lw=1)  # c_2's rows above, c_1's below
    ax1.set_title(rf"Coordinates of $c_2$ and $c_1$ ($\beta$={beta:g})")
    ax1.set_xlabel("coordinate along")
    fig.colorbar(im, ax=ax1, shrink=0.8)
    ax2.imshow(alpha.numpy(), cmap="Greys", vmin=0, vmax=1)
    for (i, j), v in zip(torch.cartesian_prod(torch.arange(3), torch.arange(3)).tolist(), alpha.flatten().tolist()):
        ax2.text(j, i, f"{v:.2f}", ha="center", va="center", color="red", fontsize=10)
    ax2.set_xticks(range(3), ["$k_1$", "$k_2$", "$k_3$"])
    ax2.set_yticks(range(3), ["$q_1$", "$q_2$", "$q_3$"])
    ax2.set_title("Attention weights with $V, K, Q$")
    ax2.set(xlabel="key", ylabel="query")
    fig.tight_layout()
    return fig


save_then_explore(
    plot_kqv,
    "01_kqv_self_attention",
    question="What do key, query and value projections buy in self-attention?",
    caption="Left: coordinates of c_2 in the basis (u_a, u_b, u_c, u_d) without projections (four ways of padding "
    "x_2), with the V, K, Q of Exercise 1.10, and the target u_b; below the line c_1 with V, K, Q and its target "
    "u_b - u_c. Right: the attention weights the projections create.",
    beta=(0.5, 10.0, 0.5, BETA7),
)

# %% tags=["check"]
from helpers.nn.attention import self_attention


def check_construction(Q, K, V, tol=1e-4, X=X7, targets=(u_b, u_c), beta=BETA7):
    """With the projections, c2 = u_b and c1 = u_b - u_c up to tol * beta."""
    ub, uc = targets
    c, _ = self_attend(X, Q.T, K.T, V.T)
    assert (c[1] - ub).norm() < tol * beta, f"c2 is {(c[1] - ub).norm():.2e} away from u_b"
    assert (c[0] - (ub - uc)).norm() < tol * beta, f"c1 is {(c[0] - (ub - uc)).norm():.2e} away from u_b - u_c"
    c_ref, _ = self_attention(X, Q.T, K.T, V.T, scale=1.0)
    assert probes.close(c, c_ref, atol=1e-12), "self_attend differs from helpers.nn.attention.self_attention"


def check_routing(route_fn, seed=SEED):
    """route_fn(u_a, u_b, u_c, u_d) -> Q, K, V for the u's of the text, and for other norms of them (one drawn from
    `seed`): the projections must follow them."""
    # the drawn norm factor stays within 0.75 to 1.5 times the text's: the norms this check covers
    drawn = 0.75 + 0.75 * float(torch.rand(1, generator=torch.Generator().manual_seed(seed)))
    for factor in (1.0, 0.75, 1.5, drawn):
        check_construction(
            *route_fn(*(factor * U7)), X=factor * X7, targets=(factor * u_b, factor * u_c), beta=factor * BETA7
        )


def probe_routing(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_routing, fn, seed=seed)


def verify_routing(results, seed=SEED):
    """The check again, on the projections your function returned: attention computed here."""
    probes.replay(check_routing, results, seed=seed)


verify_routing(probe_routing(route_projections))

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* Without projections every padding of $x_2$ leaves $c_2$ on $x_2$
# itself (a large $u_a$ coordinate), never on $u_b$. With the projections $x_1$ reads $x_3$ and $x_2$
# reads $x_1$, and both outputs match their targets.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.7 (3 points).**
# - **3 points:** (i) $x_2 = u_a$ scores $(0, \beta^2, 0)$, so $c_2 \approx u_a$; with $x_2 = u_a + s\,u_c + t\,u_d$ the
#   self-score still wins by at least $\tfrac34\beta^2$ for every $s, t$, so $c_2 \approx x_2$ never nears $u_b$: a
#   token attends to itself. (ii) a construction that works, e.g. $V = (u_bu_b^\top - u_cu_c^\top)/\beta^2$, $K = I$,
#   $Q = (u_du_a^\top + u_cu_d^\top)/\beta^2$, with the scores that give $c_2 \approx u_b$ and $c_1 \approx u_b - u_c$.
# - **2 points:** (ii) right and (i) shown for examples but not for any multiples; or (i) proved and (ii) with
#   one of the two outputs wrong.
# - **1 point:** one of (i) and (ii) only, or both claimed without the scores.
# - **0 points:** padding $x_2$ said to reach $u_b$, and no working construction.
#
# *Key phrases:* "u_du_a^\top", "u_bu_b^\top - u_cu_c^\top", "attends to itself"

# %% [markdown]
# ## 8. Does self-attention know the order of its inputs?
#
# Let $\Pi$ be a permutation matrix, acting on the rows of $X \in \mathbb{R}^{T\times d}$, and
# $\mathrm{Attn}(X) = \operatorname{softmax}\!\big(c\,XW_q (XW_k)^\top\big)\,XW_v$, with a fixed scale $c > 0$ (which one is
# item 9's question; any will do here). Position
# encodings $P \in \mathbb{R}^{T\times d}$ are attached to *slots*, not to tokens: the model sees $X + P$.
# Here $P$ is any fixed vector per slot, drawn at random; notebook 02 builds the table its model uses.

# %%
T8, D_MODEL8, D_K8 = 6, 16, 8
C8 = 0.3  # the fixed scale c of the scores
g8 = rng(8)
X8 = torch.randn(T8, D_MODEL8, generator=g8, dtype=DTYPE)  # (T, d_model)
Wq8, Wk8, Wv8 = (torch.randn(D_MODEL8, D_K8, generator=g8, dtype=DTYPE) for _ in range(3))  # (d_model, d_k)
P8 = torch.randn(T8, D_MODEL8, generator=rng(80), dtype=DTYPE)  # (T, d_model): one fixed vector per slot


def attn_plain(X):
    return self_attend(X, Wq8, Wk8, Wv8, scale=C8)[0]


def attn_with_positions(X):
    return self_attend(X + P8[: len(X)], Wq8, Wk8, Wv8, scale=C8)[0]


perms8 = [p for p in (torch.randperm(T8, generator=g8) for _ in range(60)) if not torch.equal(p, torch.arange(T8))][:40]


vocab = {w: torch.randn(D_MODEL8, generator=g8, dtype=DTYPE) for w in ["the", "dog", "bit", "man"]}
s1, s2 = "the dog bit the man".split(), "the man bit the dog".split()
E1, E2 = torch.stack([vocab[w] for w in s1]), torch.stack([vocab[w] for w in s2])

# %% [markdown] tags=["question"]
# **Question 1.8 (2 points).** Does self-attention know the order of its inputs? Express
# $\mathrm{Attn}(\Pi X)$ in terms of $\mathrm{Attn}(X)$ and prove it. What does that mean for
# "the dog bit the man" against "the man bit the dog"? What changes when positions are added,
# $\mathrm{Attn}(\Pi X + P)$?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the output for "dog" in the two sentences.
for name, fn in [("without positions", attn_plain), ("with positions", attn_with_positions)]:
    diff = (fn(E1)[s1.index("dog")] - fn(E2)[s2.index("dog")]).norm()
    print(f"{name:18s}: ||out('dog' in s1) - out('dog' in s2)|| = {diff:.1e}")

# %% [markdown] tags=["answer"]
# **Model answer.** The scores of $\Pi X$ are $\Pi S \Pi^\top$. A row-wise softmax does not care how the
# entries of a row are ordered, so $\operatorname{softmax}(\Pi S \Pi^\top) = \Pi\,\operatorname{softmax}(S)\,\Pi^\top$.
# Since $\Pi^\top\Pi = I$:
#
# $$\mathrm{Attn}(\Pi X) = \Pi\,\operatorname{softmax}(S)\,\Pi^\top\,\Pi X W_v = \Pi\,\mathrm{Attn}(X).$$
#
# Self-attention is *permutation equivariant*. Shuffle the words and you shuffle the outputs the
# same way, so "the dog bit the man" and "the man bit the dog" give "dog" the same vector (up to
# rounding). Position encodings break this:
# $\mathrm{Attn}(\Pi X + P) \ne \Pi\,\mathrm{Attn}(X + P) = \mathrm{Attn}(\Pi X + \Pi P)$ because
# $\Pi P \ne P$.

# %% [markdown]
# **The figure.** Shuffle six inputs 40 times. For each output vector of the shuffled inputs, find the nearest
# output vector of the inputs as they were, wherever it sits; per shuffle, the largest of those six distances, on
# a log scale, without and with positions. (An exact zero is drawn at the bottom of the axis.)


# %%
def shuffle_gaps(attn_fn, X, perms):
    """For each shuffle p: the largest distance from an output of the shuffled inputs to its nearest output of the
    inputs as they were (in any slot)."""
    # cdist: (T, T), row i = output i after the shuffle against every output before it
    return [torch.cdist(attn_fn(X[p]), attn_fn(X)).min(dim=1).values.max().item() for p in perms]


gaps_plain = shuffle_gaps(attn_plain, X8, perms8)
gaps_pos = shuffle_gaps(attn_with_positions, X8, perms8)
fig, ax = plt.subplots(figsize=(7, 3.8))
ax.semilogy([max(g, 1e-18) for g in gaps_plain], "o", ms=4, label="no positions")  # an exact 0 drawn at 1e-18
ax.semilogy([max(g, 1e-18) for g in gaps_pos], "s", ms=4, label="positions added")
ax.set(
    xlabel="random shuffle of the inputs",
    ylabel="largest distance to the nearest\noutput before the shuffle",
    title=f"Outputs after a shuffle against the outputs before it (T={T8})",
)
ax.set_ylim(1e-18, 1e2)
ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "01_shuffled_inputs",
    question="Does self-attention know the order of its inputs?",
    caption="For 40 random shuffles of six inputs, the largest distance from an output vector of the shuffled "
    "inputs to the nearest output vector of the unshuffled ones, in any slot (log scale; an exact zero at 1e-18), "
    "without positions and with a fixed vector per slot added.",
    numbers={"largest gap without positions": max(gaps_plain), "smallest gap with positions": min(gaps_pos)},
)
plt.show()
print(
    f"over {len(perms8)} shuffles: without positions the gaps run from {min(gaps_plain):.1e} to {max(gaps_plain):.1e}; "
    f"with positions from {min(gaps_pos):.1e} to {max(gaps_pos):.1e}"
)


# %% tags=["answer"]
# The solved notebook's checks and sentences for Question 1.8 (the student copy prints only the gaps above).
def check_equivariant(attn_fn, X=X8, perms=perms8):
    worst = max((attn_fn(X[p]) - attn_fn(X)[p]).abs().max().item() for p in perms)  # each input to its new slot
    assert worst < 1e-10, f"Attn(PX) differs from P Attn(X) by {worst:.2e}: not permutation equivariant"


def check_order_sensitive(attn_fn, X=X8, perms=perms8):
    least = min(shuffle_gaps(attn_fn, X, perms))
    assert least > 1e-3, f"some shuffle changes the output by only {least:.2e}: the layer ignores order"


check_equivariant(attn_plain)
check_order_sensitive(attn_with_positions)


def describe_equivariance(gaps_plain, gaps_pos, rounding=1e-10):
    """Two sentences from the measured gaps (they flip if the numbers do)."""
    worst, least = max(gaps_plain), min(gaps_pos)
    if worst < rounding:
        plain = "at rounding level: every output after a shuffle is an output from before it, in some slot"
    else:
        plain = "above rounding level: some shuffle makes an output that was not there before"
    pos = "every shuffle makes new outputs" if least > rounding else "some shuffle still only rearranges the outputs"
    return (
        f"Without positions the largest gap over {len(gaps_plain)} shuffles is {worst:.1e}, {plain}. "
        f"With positions the smallest is {least:.1e}: {pos}."
    )


print(describe_equivariance(gaps_plain, gaps_pos))

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* Without positions every gap sits at float64 rounding ($\sim 10^{-16}$);
# with positions added every gap is of order one: the order of the inputs now changes the outputs.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.8 (2 points).**
# - **2 points:** the scores of $\Pi X$ are $\Pi S\Pi^\top$ and a row-wise softmax commutes with the permutation, so
#   $\mathrm{Attn}(\Pi X) = \Pi\,\mathrm{Attn}(X)$: permutation equivariant, shuffling the inputs shuffles the
#   outputs the same way; "dog" gets the same vector in both sentences; with positions
#   $\mathrm{Attn}(\Pi X + P) \ne \Pi\,\mathrm{Attn}(X + P)$ because $\Pi P \ne P$, so the order now counts.
# - **1 point:** the equivariance stated or measured without the proof, or the proof without what it means for
#   the two sentences and for positions.
# - **0 points:** self-attention said to know the order, or "dog" said to differ between the sentences without
#   positions.
#
# *Key phrases:* "permutation equivariant", "= \Pi\,\mathrm{Attn}(X)", "the outputs the same way", "\Pi P \ne P"

# %% [markdown]
# ## 9. How large are the scores, and what should they be multiplied by?
#
# Transformers rescale the scores $QK^\top$ before the softmax; by what, and why, is this item's question. Take $q, k \in \mathbb{R}^d$ with
# independent entries of mean $0$, variance $\sigma_q^2$ for those of $q$ and $\sigma_k^2$ for those of $k$.

# %% [markdown] tags=["question"]
# **Question 1.9 (3 points).** Derive $\operatorname{Var}(q^\top k)$. If the scores are left unscaled, what
# happens to the softmax over $n$ keys as $d$ grows, and to the gradient that reaches the scores
# (write the softmax's Jacobian $\partial\alpha/\partial s$)? By what factor must $q^\top k$ be
# multiplied so that the scores have variance $1$ for every $d$?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: the variance of q.k over random draws, for a few d.
g_try = torch.Generator().manual_seed(90)
for d in [4, 64, 1024]:
    q_try, k_try = torch.randn(2, 2000, d, generator=g_try, dtype=DTYPE)
    print(f"d = {d:5d}: Var(q.k) measured {(q_try * k_try).sum(-1).var():9.2f}")

# %% [markdown] tags=["answer"]
# **Model answer.** $q^\top k = \sum_{l=1}^d q_l k_l$ is a sum of $d$ independent terms of mean $0$ and
# variance $\mathbb{E}[q_l^2]\,\mathbb{E}[k_l^2] = \sigma_q^2\sigma_k^2$, so
#
# $$\operatorname{Var}(q^\top k) = d\,\sigma_q^2\sigma_k^2, \qquad \operatorname{Var}\!\big(q^\top k/(\sigma_q\sigma_k\sqrt{d})\big) = 1 .$$
#
# Unscaled, the scores spread like $\sqrt d$, so the gap between the largest and the second score
# grows and the softmax *saturates* (the top weight goes to 1). A saturated softmax passes back
# almost no gradient. Its Jacobian is
#
# $$\frac{\partial \alpha}{\partial s} = \operatorname{diag}(\alpha) - \alpha\alpha^\top ,$$
#
# (for a batch of rows, `torch.diag_embed(alpha) - alpha[..., :, None] * alpha[..., None, :]`),
# whose entries $\alpha_i(\delta_{ij} - \alpha_j)$ all vanish when $\alpha$ is one-hot. The queries and
# keys then stop learning. Dividing by $\sqrt d$ (with unit-variance entries) keeps the scores at unit
# variance for every $d$.

# %% tags=["answer"]
# the closed-form Jacobian of the model answer is what autograd computes
s_test = torch.randn(5, generator=rng(9), dtype=DTYPE)
a_test = torch.softmax(s_test, -1)
assert torch.allclose(
    torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), s_test),
    torch.diag(a_test) - torch.outer(a_test, a_test),
    atol=1e-12,
)

# %% [markdown]
# ### Exercise 1.11 · The variance of a score, and the factor that fixes it (3 points)
#
# Write what you derived in Question 1.9: `score_variance` gives $\operatorname{Var}(q^\top k)$ and
# `score_scale` the factor that brings it to $1$, both for any $d$, $\sigma_q^2$ and $\sigma_k^2$. The
# checks measure both on random draws; the figure then uses them, with the softmax you wrote in
# Exercise 1.2.


# %%
def score_variance(d, var_q=1.0, var_k=1.0):
    """Var(q . k) for q, k in R^d with independent entries of mean 0 and variances var_q, var_k."""
    return d * var_q * var_k  # SOLUTION


def score_scale(d, var_q=1.0, var_k=1.0):
    """The factor to multiply q . k by so that the scores have variance 1, for any d, var_q, var_k."""
    return 1 / math.sqrt(d * var_q * var_k)  # SOLUTION


def measure_score_variance(d, var_q=1.0, var_k=1.0, scale=1.0, n_draws=4_000, seed=SEED):
    """Var(scale * q . k) over n_draws random pairs (q, k) with entries N(0, var_q) and N(0, var_k)."""
    g = torch.Generator().manual_seed(seed + d)
    q = math.sqrt(var_q) * torch.randn(n_draws, d, generator=g, dtype=DTYPE)
    k = math.sqrt(var_k) * torch.randn(n_draws, d, generator=g, dtype=DTYPE)
    return (scale * (q * k).sum(-1)).var().item()


def softmax_last(s):
    return torch.softmax(s, dim=-1)


def score_stats(d, scale, n_keys=16, n_trials=N_TRIALS, seed=9):
    """Score variance, mean top weight and median softmax-Jacobian norm for random q, K in R^d (unit variances)."""
    g = torch.Generator().manual_seed(seed + d)
    q = torch.randn(n_trials, 1, d, generator=g, dtype=DTYPE)  # (R, 1, d)
    K = torch.randn(n_trials, n_keys, d, generator=g, dtype=DTYPE)  # (R, n, d)
    scores = scale * (q @ K.transpose(-2, -1)).squeeze(1)  # (R, n)
    alpha = stable_softmax(scores)  # Exercise 1.2's
    jac = torch.func.vmap(torch.func.jacrev(softmax_last))(scores)  # (R, n, n): d alpha / d s, by autograd
    # the median: the mean is carried by the few queries that happen to meet two near-tied keys
    return scores.var().item(), alpha.max(dim=-1).values.mean().item(), jac.norm(dim=(-2, -1)).median().item()


# %% tags=["check"]
VARIANCE_CASES = [(4, 1.0, 1.0), (64, 1.0, 1.0), (256, 1.0, 1.0), (16, 4.0, 1.0), (64, 0.5, 3.0), (32, 2.0, 0.25)]


def variance_cases(seed):
    """VARIANCE_CASES and one case drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    d, var_q, var_k = int(torch.randint(2, 300, (1,), generator=g)), *(0.25 + 3 * torch.rand(2, generator=g)).tolist()
    return [*VARIANCE_CASES, (d, var_q, var_k)]


def check_score_variance_formula(variance_fn, rel_tol=0.1, seed=SEED):
    """variance_fn(d, var_q, var_k) must match the variance measured on 4,000 random draws to within rel_tol."""
    for d, var_q, var_k in variance_cases(seed):
        derived, measured = float(variance_fn(d, var_q, var_k)), measure_score_variance(d, var_q, var_k)
        assert abs(derived / measured - 1) < rel_tol, (
            f"d={d}, var_q={var_q:g}, var_k={var_k:g}: you derived Var(q.k) = {derived:.4g}, random draws give {measured:.4g}"
        )


def check_unit_variance(scale_fn, rel_tol=0.1, seed=SEED):
    """Multiplied by scale_fn(d, var_q, var_k), the scores must have variance 1 (to within rel_tol) in every case."""
    for d, var_q, var_k in variance_cases(seed):
        var = measure_score_variance(d, var_q, var_k, scale=float(scale_fn(d, var_q, var_k)))
        assert abs(var - 1) < rel_tol, (
            f"d={d}, var_q={var_q:g}, var_k={var_k:g}: Var(scale * q.k) = {var:.3g}, expected 1"
        )


def check_scaling_keeps_gradients(scale_fn, d_small=4, d_big=1024, seed=SEED):
    """Scores scaled by scale_fn(d): at d_big, a mean top weight below 0.9 and a median Jacobian norm above half
    the one at d_small."""
    _, top_small, jac_small = score_stats(d_small, scale_fn(d_small))
    _, top_big, jac_big = score_stats(d_big, scale_fn(d_big))
    assert top_big < 0.9, f"d={d_big}: mean top weight {top_big:.3f}, expected below 0.9"
    assert jac_big > 0.5 * jac_small, (
        f"d={d_big}: median Jacobian norm {jac_big:.2e}, expected above half of {jac_small:.2e} (d={d_small})"
    )


def probe_score_variance_formula(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_score_variance_formula, fn, seed=seed)


def verify_score_variance_formula(results, seed=SEED):
    """The variances measured here against what your formula gave."""
    probes.replay(check_score_variance_formula, results, seed=seed)


verify_score_variance_formula(probe_score_variance_formula(score_variance))


def probe_unit_variance(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_unit_variance, fn, seed=seed)


def verify_unit_variance(results, seed=SEED):
    """The scaled variances measured here."""
    probes.replay(check_unit_variance, results, seed=seed)


verify_unit_variance(probe_unit_variance(score_scale))


def probe_scaling_keeps_gradients(fn, seed=SEED):
    """Runs your function through the check above (inputs drawn from `seed`): what each call returned."""
    return probes.record(check_scaling_keeps_gradients, fn, seed=seed)


def verify_scaling_keeps_gradients(results, seed=SEED):
    """The top weights and Jacobians measured here."""
    probes.replay(check_scaling_keeps_gradients, results, seed=seed)


verify_scaling_keeps_gradients(probe_scaling_keeps_gradients(score_scale))

# %%
for d, var_q, var_k in VARIANCE_CASES[2:5]:
    print(
        f"d={d:4d}, var_q={var_q:g}, var_k={var_k:g}: Var(q.k) derived {score_variance(d, var_q, var_k):7.1f}, "
        f"measured {measure_score_variance(d, var_q, var_k):7.1f};  scaled by score_scale: "
        f"{measure_score_variance(d, var_q, var_k, scale=score_scale(d, var_q, var_k)):.3f}"
    )

# %%
DIMS = [2**e for e in range(1, 11)]
unscaled = [score_stats(d, 1.0) for d in DIMS]
scaled = [score_stats(d, score_scale(d)) for d in DIMS]
for d, u, s in zip(DIMS[::3], unscaled[::3], scaled[::3]):
    print(
        f"d={d:5d}  unscaled: var {u[0]:7.1f}, top weight {u[1]:.3f}, |J| {u[2]:.1e}   scaled: var {s[0]:.2f}, top weight {s[1]:.3f}, |J| {s[2]:.2f}"
    )

# %% [markdown]
# **The figure.** Left: the measured score variance against $d$, unscaled and scaled by your
# `score_scale`, with your `score_variance` dashed. Middle: the mean top weight of 16 keys. Right: the
# norm of the softmax Jacobian (the gradient that reaches the scores) for a typical query, the median
# over draws.

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
for stats, label, marker in [(unscaled, r"$q\cdot k$", "o"), (scaled, r"score_scale$(d)\; q\cdot k$", "s")]:
    for ax, i in zip(axes, range(3)):
        ax.plot(DIMS, [s[i] for s in stats], marker=marker, ms=4, label=label)
axes[0].plot(DIMS, [score_variance(d) for d in DIMS], ls="--", c="gray", label="your score_variance$(d)$")
axes[0].set(xscale="log", yscale="log", xlabel="dimension $d$", ylabel="Var(score)", title="Score variance")
axes[1].set(
    xscale="log",
    xlabel="dimension $d$",
    ylabel=r"mean $\max_i \alpha_i$",
    title="Top weight of the softmax (16 keys)",
    ylim=(0, 1.05),
)
axes[2].set(
    xscale="log",
    yscale="log",
    xlabel="dimension $d$",
    ylabel=r"median $\|\partial\alpha/\partial s\|_F$",
    title="Gradient through the softmax",
)
for ax in axes:
    ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "01_score_scale",
    question="How do the scores and the softmax's gradient behave as d grows, unscaled and rescaled?",
    caption="Random q and 16 keys in R^d, scores q.k unscaled and multiplied by the factor of Exercise 1.11: score "
    "variance (left), mean top weight (middle) and the median norm of the softmax Jacobian (right), against d.",
    numbers={
        "Var(score) unscaled at d=1024": unscaled[-1][0],
        "Var(score) scaled at d=1024": scaled[-1][0],
        "top weight unscaled at d=1024": unscaled[-1][1],
    },
)
plt.show()

# %% [markdown] tags=["answer"]
# **Model answer.** *The figure.* Unscaled, the variance follows the line $d$, the top weight climbs
# to $1$ and the Jacobian norm collapses by orders of magnitude by $d = 1024$; scaled, all three stay
# flat. (The *mean* Jacobian norm falls less steeply than the median, because a few queries happen to
# meet two nearly tied keys and keep a gradient.)

# %% [markdown] tags=["answer"]
# #### Model answer, measured: the sentences of this run


# %% tags=["answer"]
# The solved notebook's sentences, computed from the numbers printed under Exercise 1.11 (the student copy
# prints only the numbers).
def describe_scaling(dims, unscaled, scaled):
    """One sentence per kind of score, from the measured (variance, top weight, Jacobian norm) at each d."""

    def change(first, last):
        orders = math.log10(max(first, 1e-300) / max(last, 1e-300))
        if orders >= 1:
            return f"falls by {orders:.1f} orders of magnitude"
        if orders <= -1:
            return f"grows by {-orders:.1f} orders of magnitude"
        return f"stays within a factor {10 ** abs(orders):.1f}"

    lines = []
    for label, stats in [("Unscaled", unscaled), ("Scaled", scaled)]:
        (v0, t0, j0), (v1, t1, j1) = stats[0], stats[-1]
        lines.append(
            f"{label}, from d={dims[0]} to d={dims[-1]}: Var(score) {v0:.3g} -> {v1:.3g}, mean top weight "
            f"{t0:.2f} -> {t1:.2f}, and the median Jacobian norm {change(j0, j1)} ({j0:.1e} -> {j1:.1e})."
        )
    return "\n".join(lines)


print(describe_scaling(DIMS, unscaled, scaled))

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 1.9 (3 points).** The variance's formula and the factor are graded once, by Exercise 1.11's
# checks; this rubric grades the reasoning.
# - **3 points:** (1 point) the derivation of the variance: $d$ independent terms of variance $\sigma_q^2\sigma_k^2$,
#   added ($\operatorname{Var}(q^\top k) = d\,\sigma_q^2\sigma_k^2$); (1 point) unscaled, the scores spread like
#   $\sqrt d$ and the softmax saturates (the top weight goes to 1); (1 point) its Jacobian
#   $\operatorname{diag}(\alpha) - \alpha\alpha^\top$ vanishes for a one-hot $\alpha$, so almost no gradient reaches
#   the scores.
# - **2 points:** two of those three parts.
# - **1 point:** one of them.
# - **0 points:** none, or a variance said to be $\sigma_q^2\sigma_k^2$ or $d^2\sigma_q^2\sigma_k^2$.
#
# *Key phrases:* "\alpha\alpha^\top", "saturates", "\sigma_q\sigma_k\sqrt", "diag_embed(alpha) - alpha"

# %% [markdown]
# ## Summary
#
# | item | question | exercise | checks |
# |---|---|---|---|
# | 0 | attention in one line | 1.1 `attend` | `check_matches_package` |
# | 1 | is $\alpha$ a distribution, at any scale? | 1.2 `stable_softmax` | `check_categorical`, `check_stable_softmax` |
# | 2 | can one query copy a value, and how fast? | 1.3 `copying_query`, 1.4 `copy_error_bound` | `check_copying_query`, `check_copying_bound` |
# | 3 | can one query average two values, with how large a $\beta$? | 1.5 `averaging_query`, 1.6 `beta_needed` | `check_averaging_query`, `check_beta_needed`, `check_average_of_two` |
# | 4 | can a linear map recover $v_a$ from $v_a + v_b$? | 1.7 `recovering_map` | `check_recovering_map`, `check_recover` |
# | 5 | what does one head do when a key's length varies? | 1.8 `single_head_query` | `check_single_head_query` (and the figure) |
# | 6 | can two heads fix it? | 1.9 `two_head_queries` | `check_averages`, `check_multi_head` |
# | 7 | what do key, query and value projections buy? | 1.10 `route_projections` | `check_construction` |
# | 8 | does self-attention know the order of its inputs? | | (the figure) |
# | 9 | how large are the scores, and what should they be multiplied by? | 1.11 `score_variance`, `score_scale` | `check_score_variance_formula`, `check_unit_variance`, `check_scaling_keeps_gradients` |
#
# Later notebooks import attention from the package (`helpers.nn.attention`), held to your `attend` by a test.
#
# **Next, notebook 02** assembles a Transformer from attention. As you build it, find where each of your nine
# answers shows up in its design, and which of its design choices none of them explains.

# %% [markdown] tags=["answer"]
# **Model answer.** The nine answers in one table:
#
# | item | answer |
# |---|---|
# | 1 | $\alpha$ is a distribution at any scale; softmax subtracts the row's largest score so that nothing overflows |
# | 2 | $q = s\,k_j$ copies $v_j$, error $\le \min(1, (n-1)e^{-s\Delta})\max\lVert v_i - v_j\rVert$ |
# | 3 | $q = \beta(k_a+k_b)$ averages, error $= \varepsilon\lVert\bar v_{\text{rest}} - m\rVert \le 2\varepsilon\max\lVert v\rVert$; $\beta \ge \log((n-2)(1/\tau - \frac12))$ |
# | 4 | $M = AA^\top$ recovers $v_a$ from $v_a+v_b$ iff the subspaces are orthogonal (leak $\lvert\cos\theta\rvert$) |
# | 5 | one head swings between $v_a$ and $v_b$ when $\lVert k_a\rVert$ varies ($\alpha_a \approx \sigma(\beta(\gamma - 1))$) |
# | 6 | two heads ($\beta\mu_a$, $\beta\mu_b$) cut that variance by over an order of magnitude; they still miss in about one draw in eight |
# | 7 | without projections $x_2$ attends to itself; $V = (u_bu_b^\top - u_cu_c^\top)/\beta^2$, $K = I$, $Q = (u_du_a^\top + u_cu_d^\top)/\beta^2$ give $c_2 \approx u_b$, $c_1 \approx u_b - u_c$ |
# | 8 | self-attention is permutation equivariant, $\mathrm{Attn}(\Pi X) = \Pi\,\mathrm{Attn}(X)$; positions break that |
# | 9 | $\operatorname{Var}(q^\top k) = d\,\sigma_q^2\sigma_k^2$; multiplying by $1/(\sigma_q\sigma_k\sqrt d)$ keeps the softmax and its gradient alive |

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

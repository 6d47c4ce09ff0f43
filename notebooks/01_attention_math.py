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

# %% [markdown]
# # 01 · The attention math you can run
#
# Attention fits in two lines of linear algebra, and the classic written questions about it
# (is $\alpha$ a distribution? when does attention copy? how can one query average two values?
# why several heads? why divide by $\sqrt{d_k}$?) have short answers on paper. Here every answer
# becomes an experiment: the math in a markdown cell, a few lines of code that measure it, a
# figure for your report, and an `assert` that would fail if the claim were false.
#
# **What you will learn**
#
# - why the attention weights always form a probability distribution, and how softmax stays finite;
# - how a query *copies* one value, and how it *averages* two, with error bounds you derive;
# - how a projection recovers one vector from a sum when their subspaces are orthogonal;
# - why a single head is fragile when a key's length varies, and how two heads fix it;
# - what key, query and value projections buy you in self-attention;
# - why self-attention ignores word order unless positions are added;
# - why scores are divided by $\sqrt{d_k}$.
#
# The questions follow the written self-attention exercises of Stanford's CS224N.
#
# **How to run.** On Colab: *Runtime → Run all* (a CPU runtime is enough here). In a live
# notebook, sliders appear under several figures. Headless, from the repository root:
# `QUICK=1 python -m helpers run-notebooks --only 01`. Figures go to `reports/figures/01_*.pdf`
# and `.png`. Cells tagged `check` hold the asserts; `tests/test_notebook01.py` calls them again
# with broken inputs to show that each one can fail.
#
# **Notation.** In the math, vectors are columns and a score is $k_i^\top q$. In the code, vectors
# are rows: `K` is `(n, d)` and `K[i]` is key $i$.

# %% tags=["parameters"]
# Set-up and parameters. On Colab this installs the course package at the release these notebooks belong
# to (from a copy in Drive first, if there is one) and what the runtime lacks; torch is never reinstalled.
# If it cannot, it says what to do. QUICK=1 (the headless runner and the tests set it) shrinks sizes and
# steps but runs every code path; on Colab the default is the full run.
COURSE = "git+https://github.com/transformers-by-building/course@v0.2.0"
COURSE_IN_DRIVE = "/content/drive/MyDrive/transformers-by-building/course"  # a folder or .zip of the repository


def ensure_course(pinned, drive_copy, version, *, install=None, pip_args=()):
    """Make `helpers` importable; try in order: already installed, a copy in Google Drive, the pinned release.

    pinned: "git+https://...@vX.Y.Z"; drive_copy: a folder or .zip of the repository; version: the one to expect.
    Installs only on Colab (or with install=True); never touches torch. Returns where the package came from.
    """
    import importlib
    import importlib.metadata as metadata
    import subprocess
    import sys
    from pathlib import Path

    class CourseSetupError(RuntimeError):
        def _render_traceback_(self):  # Jupyter shows these lines instead of a traceback
            return ["Course set-up failed.", *str(self).splitlines()]

    try:
        if metadata.version("transformers-by-building") == version:
            return "already installed"
    except metadata.PackageNotFoundError:
        pass
    if not (("google.colab" in sys.modules) if install is None else install):
        return "this checkout (not on Colab: install it once with pip install -e .)"
    copy, tried = Path(drive_copy), []
    sources = [("the copy in Drive", str(copy))] if copy.is_dir() or copy.suffix == ".zip" and copy.is_file() else []
    for label, target in sources + [("the pinned release", pinned)]:
        print(f"Installing the course package from {label}: {target}", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", *pip_args, target], capture_output=True, text=True
        )
        if done.returncode == 0:
            importlib.invalidate_caches()
            return label
        why = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        tried.append(f"  - {label}: {why[-1] if why else 'pip failed'}")
    raise CourseSetupError(
        "The course package could not be installed. Tried:\n" + "\n".join(tried) + "\nTwo ways out:\n"
        "  1. Check this runtime's internet (open any web page from Colab), then run this cell again.\n"
        f"  2. Put the course repository (its folder, or the .zip GitHub gives you) in Google Drive at {copy},\n"
        "     mount Drive (Files panel > Mount Drive), then run this cell again."
    )


print("Course package:", ensure_course(COURSE, COURSE_IN_DRIVE, version=COURSE.rsplit("@v", 1)[1]))
from helpers import colab, runtime  # noqa: E402

QUICK = runtime.quick_mode()
SEED = 0
ACCELERATOR = colab.setup()

# %%
# Sizes, and two small conveniences. Double precision: we measure errors down to 1e-12,
# which float32 rounding (about 1e-7) would hide.
import math

import matplotlib.pyplot as plt
import torch

from helpers.plotting import save_figure, save_then_explore

DTYPE = torch.float64
N_MC = 2_000 if QUICK else 20_000  # Monte Carlo draws of the keys (items 5 and 6)
N_TRIALS = 300 if QUICK else 1_000  # random (q, K) draws per point (items 1 and 9)
N_SWEEP = 25 if QUICK else 100  # points along each sweep


def rng(item: int) -> torch.Generator:
    """A fresh generator per item, so each section gives the same numbers however the notebook is run."""
    return torch.Generator().manual_seed(SEED + item)


# %% [markdown]
# ## 0. Attention in one line · Exercise 1.1 (3 points)
#
# A query $q \in \mathbb{R}^d$ looks at $n$ keys $k_1, \dots, k_n \in \mathbb{R}^d$, each paired
# with a value $v_i \in \mathbb{R}^{d_v}$. It scores every key by a dot product, turns the scores
# into weights with a softmax, and returns the weighted average of the values:
#
# $$\alpha_i = \frac{\exp(k_i^\top q)}{\sum_{j=1}^n \exp(k_j^\top q)}, \qquad c = \sum_{i=1}^n \alpha_i v_i .$$
#
# Stacking keys and values as the rows of $K \in \mathbb{R}^{n\times d}$ and $V \in \mathbb{R}^{n\times d_v}$,
# this is $\alpha = \operatorname{softmax}(qK^\top)$ and $c = \alpha V$. For $m$ queries at once
# (rows of $Q$), the softmax runs along each row of $QK^\top$, that is, over the keys.


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

# %%
K0 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=DTYPE)  # (3, 2) keys
V0 = torch.eye(3, dtype=DTYPE)  # (3, 3) one-hot values
q0 = torch.tensor([2.0, 0.0], dtype=DTYPE)
c0, alpha0 = attend(q0, K0, V0)
print("scores:", (q0 @ K0.T).tolist())
print("alpha: ", [round(a, 3) for a in alpha0.tolist()])
print("c:     ", [round(x, 3) for x in c0.tolist()])

# %% [markdown]
# `attend` is also `helpers.attention.attention`, which later notebooks import (it adds an
# optional scale and mask). The check below, and a test, hold the two to the same numbers.

# %% tags=["check"]
from helpers.attention import attention


def check_matches_package(attend_fn, seed=SEED):
    """attend_fn must give the same (c, alpha) as helpers.attention.attention, for one query and for batches."""
    g = torch.Generator().manual_seed(seed)
    for q_shape, kv_batch in [((8,), ()), ((4, 8), ()), ((2, 4, 8), (2,))]:
        q = torch.randn(q_shape, generator=g, dtype=DTYPE)
        K = torch.randn(*kv_batch, 5, 8, generator=g, dtype=DTYPE)
        V = torch.randn(*kv_batch, 5, 3, generator=g, dtype=DTYPE)
        (c, alpha), (c_ref, alpha_ref) = attend_fn(q, K, V), attention(q, K, V)
        assert torch.allclose(alpha, alpha_ref, atol=1e-12), f"weights differ from the package for q {q_shape}"
        assert torch.allclose(c, c_ref, atol=1e-12), f"outputs differ from the package for q {q_shape}"


check_matches_package(attend)

# %% [markdown]
# ## 1. The weights $\alpha$ form a categorical distribution
#
# **Question.** Is $\alpha$ a probability distribution over the keys for *any* query and keys?
#
# **Math.** Each $\exp(k_i^\top q) > 0$, so every $\alpha_i > 0$, and dividing by the sum makes
# $\sum_i \alpha_i = 1$. In floating point there is a catch: $\exp(s)$ overflows to $\infty$ for
# $s > 709$ (float64), and $\infty/\infty$ is NaN. Softmax therefore computes the same fraction
# after subtracting the largest score $s^\ast$:
#
# $$\alpha_i = \frac{e^{s_i - s^\ast}}{\sum_j e^{s_j - s^\ast}} .$$
#
# Now the largest term is $e^0 = 1$, so the denominator lies in $[1, n]$ and nothing overflows;
# tiny weights may underflow to exactly $0$, which is why the check asks for $\alpha_i \ge 0$.
#
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
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-12), (
            f"weights do not sum to 1 over the keys at scale {s:g} (worst sum {sums.flatten()[(sums - 1).abs().argmax()]:.6g})"
        )


check_categorical(attend)
print(f"alpha is a distribution for {len(SCALES)} scales from 1e-12 to 1e12 (no NaN, >= 0, sums to 1).")

# %% [markdown]
# > **Aside.** The textbook formula, written literally, fails this check: one score of 1000 is enough.


# %%
def naive_softmax(scores):
    e = torch.exp(scores)  # overflows to inf for scores above ~709
    return e / e.sum(dim=-1, keepdim=True)


scores = torch.tensor([1000.0, 0.0], dtype=DTYPE)
print("naive:", naive_softmax(scores).tolist(), "  torch.softmax:", torch.softmax(scores, dim=-1).tolist())

# %% [markdown]
# **What the plot shows.** The scale acts as an inverse temperature. Left: one query's weights at
# three scales, from nearly uniform to nearly one-hot. Right: the entropy
# $H(\alpha) = -\sum_i \alpha_i \log \alpha_i$ averaged over random draws. It falls from its
# maximum $\log n$ (uniform) towards $0$ (one-hot) and never leaves that range.


# %%
def plot_categorical(n=8, d=16):
    g = rng(1)
    q = torch.randn(d, generator=g, dtype=DTYPE) / math.sqrt(d)  # scores of order 1 at scale 1
    K = torch.randn(n, d, generator=g, dtype=DTYPE)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.27
    for i, s in enumerate([0.1, 1.0, 5.0]):
        _, alpha = attend(s * q, K, K)
        ax1.bar([k + (i - 1) * width for k in range(n)], alpha.numpy(), width, label=f"scale {s:g}")
    ax1.set(xlabel="key index $i$", ylabel=r"weight $\alpha_i$", title="One query, three scales")
    ax1.legend()

    scales = torch.logspace(-2, 2, N_SWEEP).tolist()
    qs = torch.randn(N_TRIALS, 1, d, generator=g, dtype=DTYPE) / math.sqrt(d)  # (R, 1, d)
    Ks = torch.randn(N_TRIALS, n, d, generator=g, dtype=DTYPE)  # (R, n, d)
    entropy = []
    for s in scales:
        _, alpha = attend(s * qs, Ks, Ks)
        entropy.append(-torch.special.xlogy(alpha, alpha).sum(-1).mean().item())
    ax2.semilogx(scales, entropy, marker=".", label=r"mean $H(\alpha)$")
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
    "weights against the query's scale, between log n (uniform) and 0 (one-hot).",
    n=(2, 64, 1, 8),
)

# %% [markdown]
# ## 2. Copying: one aligned, large query picks one value · Exercise 1.2 (2 points)
#
# **Question.** Can attention *copy* a single value $v_j$, that is, make $c \approx v_j$?
#
# **Math.** Take unit-norm keys and the query $q = s\,k_j$ for a scale $s > 0$. The scores are
# $s\,k_i^\top k_j$, largest for $i=j$ (where it is $s$). Call the gap to the runner-up
# $\Delta = 1 - \max_{i\neq j} k_i^\top k_j > 0$. Dividing the numerator and denominator of
# $\alpha_j$ by $e^{s}$:
#
# $$1 - \alpha_j = \frac{\sum_{i\ne j} e^{-s(1-k_i^\top k_j)}}{1 + \sum_{i\ne j} e^{-s(1-k_i^\top k_j)}} \le (n-1)\,e^{-s\Delta} \xrightarrow[s\to\infty]{} 0 .$$
#
# And since $c - v_j = \sum_{i\ne j}\alpha_i (v_i - v_j)$, the copy error obeys
#
# $$\lVert c - v_j\rVert \le (1-\alpha_j)\,\max_i \lVert v_i - v_j\rVert \le \min\!\big(1, (n-1)e^{-s\Delta}\big)\max_i \lVert v_i - v_j\rVert .$$
#
# The error shrinks *exponentially* in the query's norm, at a rate set by how distinct the keys are.
#
# > **Aside.** "Aligned" matters more than it sounds. With keys of different lengths, a longer key
# > $k_i$ can have a larger score $k_i^\top k_j$ than $k_j^\top k_j$; attention then copies $v_i$.
# > Unit keys rule that out.


# %%
def unit_keys_and_values(n, d, d_v, g):
    K = torch.randn(n, d, generator=g, dtype=DTYPE)
    K = K / K.norm(dim=-1, keepdim=True)  # unit keys: k_j is then the key most aligned with itself
    V = torch.randn(n, d_v, generator=g, dtype=DTYPE)
    return K, V


def copying_sweep(K, V, j, scales):
    """For q = s k_j at each scale s: alpha_j, the copy error ||c - v_j|| and its bound (from the math above)."""
    gap = 1 - torch.cat([K[:j], K[j + 1 :]]) @ K[j]  # (n-1,) each 1 - k_i.k_j
    spread = (V - V[j]).norm(dim=-1).max()
    rows = []
    for s in scales:
        c, alpha = attend(s * K[j], K, V)
        bound = min(1.0, (len(K) - 1) * math.exp(-s * gap.min().item())) * spread  # SOLUTION
        rows.append((alpha[j].item(), (c - V[j]).norm().item(), bound.item()))
    return torch.tensor(rows, dtype=DTYPE)  # (len(scales), 3)


COPY_SCALES = torch.linspace(0, 80, N_SWEEP, dtype=DTYPE).tolist()
K2, V2 = unit_keys_and_values(16, 16, 4, rng(2))
copy = copying_sweep(K2, V2, 0, COPY_SCALES)
print(
    f"scale {COPY_SCALES[0]:.0f}: alpha_j = {copy[0, 0]:.3f} (= 1/n);  scale {COPY_SCALES[-1]:.0f}: alpha_j = {copy[-1, 0]:.12f}, "
    f"||c - v_j|| = {copy[-1, 1]:.1e}"
)

# %% [markdown]
# **What the plot shows.** Left: $\alpha_j$ climbs from $1/n$ at $s=0$ to $1$ as the query grows.
# Right: on a log scale the copy error falls along a straight line (exponential decay, slope at
# least $\Delta$), always under the dashed bound, until float64 rounds it to exactly $0$ (the curve
# leaves the plot). Use the sliders to see that more keys, or fewer dimensions (keys closer together,
# smaller $\Delta$), need a larger query.


# %%
def plot_copying(n=16, d=16):
    K, V = unit_keys_and_values(n, d, 4, rng(2))
    sweep = copying_sweep(K, V, 0, COPY_SCALES)
    zoom = torch.linspace(0, 15, N_SWEEP).tolist()  # alpha_j saturates early: look closely at small s
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax1.plot(zoom, copying_sweep(K, V, 0, zoom)[:, 0].numpy(), marker=".")
    ax1.axhline(1, ls=":", c="gray")
    ax1.axhline(1 / n, ls="--", c="gray", label="$1/n$ (uniform)")
    ax1.set(xlabel="query scale $s$  ($q = s\\,k_j$)", ylabel=r"$\alpha_j$", title="Weight on the aligned key")
    ax1.legend()
    ax2.semilogy(COPY_SCALES, sweep[:, 1].numpy(), marker=".", label=r"measured $\|c - v_j\|$")
    ax2.semilogy(COPY_SCALES, sweep[:, 2].numpy(), ls="--", label=r"bound $\min(1,(n-1)e^{-s\Delta})\max_i\|v_i-v_j\|$")
    ax2.set(xlabel="query scale $s$", ylabel="copy error", title=f"Copy error, n={n} unit keys in d={d}")
    ax2.set_ylim(bottom=1e-17)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


save_then_explore(
    plot_copying,
    "01_copying_sharpness",
    question="Can attention copy one value, and how fast does the copy error shrink with the query's norm?",
    caption="Left: the weight on the aligned key against the query scale s. Right: the copy error ||c - v_j|| "
    "(log scale) falls exponentially in s and stays under the bound min(1, (n-1) exp(-s Delta)) max ||v_i - v_j||.",
    n=(2, 64, 1, 16),
    d=(2, 64, 1, 16),
)

# %% [markdown]
# The check: with the aligned query at the largest scale, $\alpha_j > 1 - 10^{-6}$ and $c$ equals
# $v_j$ to $10^{-6}$ of the values' spread; along the whole sweep the error stays under the bound.
# A query pointing elsewhere fails it.


# %% tags=["check"]
def check_copying(q_direction, K, V, j, scale=COPY_SCALES[-1]):
    """The query scale * q_direction must put all its weight on key j and return v_j."""
    c, alpha = attend(scale * q_direction, K, V)
    spread = (V - V[j]).norm(dim=-1).max()
    assert alpha[j] > 1 - 1e-6, f"alpha_j = {alpha[j]:.6f}: the query does not single out key {j}"
    assert (c - V[j]).norm() < 1e-6 * spread, f"||c - v_j|| = {(c - V[j]).norm():.2e}: c is not a copy of v_j"


def check_copying_bound(sweep):
    measured, bound = sweep[:, 1], sweep[:, 2]
    assert (measured <= bound + 1e-12).all(), f"measured copy error exceeds the bound by {(measured - bound).max():.2e}"


check_copying(K2[0], K2, V2, j=0)
check_copying_bound(copy)

# %% [markdown]
# ## 3. Average of two: one query, two values · Exercise 1.3 (2 points)
#
# **Question.** Can a single query make $c \approx \tfrac12(v_a + v_b)$?
#
# **Math.** Take orthonormal keys ($k_i^\top k_j = \delta_{ij}$, so $d \ge n$) and
# $q = \beta(k_a + k_b)$. The scores are $\beta$ for $a$ and $b$ and $0$ for the $n-2$ others, so
#
# $$\alpha_a = \alpha_b = \frac{e^\beta}{2e^\beta + n - 2}, \qquad \alpha_i = \frac{1}{2e^\beta + n - 2}\ (i\ne a,b).$$
#
# Write $m = \tfrac12(v_a + v_b)$ and $\varepsilon = \frac{n-2}{2e^\beta + n-2}$, the total weight
# on the other keys. Since $2\alpha_a - 1 = -\varepsilon$,
#
# $$c - m = (2\alpha_a - 1)\,m + \sum_{i\ne a,b}\alpha_i v_i = \varepsilon\,(\bar v_{\text{rest}} - m), \qquad
# \bar v_{\text{rest}} = \tfrac{1}{n-2}\textstyle\sum_{i\ne a,b} v_i .$$
#
# So the error is *exactly* $\varepsilon\,\lVert \bar v_{\text{rest}} - m\rVert$, and, since both
# vectors are averages of values,
#
# $$\lVert c - m\rVert \;\le\; 2\varepsilon \max_i \lVert v_i \rVert \;<\; (n-2)\,e^{-\beta}\max_i\lVert v_i\rVert .$$
#
# To reach a relative error $\tau$ it suffices that $2\varepsilon \le \tau$, that is
# $\beta \ge \log\!\big((n-2)(1/\tau - \tfrac12)\big)$: the query must grow like $\log n$.

# %%
from helpers.attention import orthonormal_vectors


def average_of_two(beta, K, V, a=0, b=1):
    """Measured error ||c - (v_a+v_b)/2|| for q = beta (k_a + k_b), its exact value and the bound."""
    n = len(K)
    c, alpha = attend(beta * (K[a] + K[b]), K, V)
    m = (V[a] + V[b]) / 2
    eps = (n - 2) / (2 * math.exp(beta) + n - 2)
    rest = V[[i for i in range(n) if i not in (a, b)]].mean(0) if n > 2 else m  # mean of the other values
    exact = eps * (rest - m).norm()
    bound = 2 * eps * V.norm(dim=-1).max()
    return (c - m).norm().item(), exact.item(), bound.item(), alpha


def orthonormal_setup(n, d_v, g):
    K = orthonormal_vectors(n, n, g, dtype=DTYPE)  # (n, n) orthonormal keys
    V = torch.randn(n, d_v, generator=g, dtype=DTYPE)  # (n, d_v) arbitrary values
    return K, V


def beta_needed(n, tau):
    """The smallest beta for which the bound 2 eps max||v|| guarantees a relative error tau, with n keys."""
    # BEGIN SOLUTION
    return math.log((n - 2) * (1 / tau - 0.5))
    # END SOLUTION


for n in [4, 64, 1024]:
    print(f"n={n:5d}: beta needed for a relative error 1e-3 is {beta_needed(n, 1e-3):.2f}")


# %% tags=["check"]
def check_beta_needed(beta_fn):
    """At beta_fn(n, tau) the bound must equal tau exactly (2 eps = tau): smaller betas miss it, larger ones waste."""
    for n in (3, 4, 64, 1024):
        for tau in (0.1, 1e-3, 1e-6):
            beta = beta_fn(n, tau)
            eps = (n - 2) / (2 * math.exp(beta) + n - 2)
            assert abs(2 * eps - tau) <= 1e-9 * tau, (
                f"n={n}, tau={tau:g}: at beta = {beta:.4f} the bound gives 2 eps = {2 * eps:.4g}, not tau"
            )


check_beta_needed(beta_needed)

# %% [markdown]
# **What the plot shows.** Left: the error against $\beta$ for several $n$, measured (solid) and
# the bound $2\varepsilon\max_i\lVert v_i\rVert$ (dashed). Each curve is flat while the others
# dominate, then falls like $e^{-\beta}$; larger $n$ shifts it right by about $\log n$. Right: at a
# fixed $\beta$ (slider), the error grows about in proportion to $n$ (for $n \ll e^\beta$,
# $\varepsilon \approx \tfrac12(n-2)e^{-\beta}$) until the other keys take most of the weight. The
# wiggles come from $\lVert\bar v_{\text{rest}} - m\rVert$, and the dotted exact formula follows them.

# %%
AVG_BETAS = torch.linspace(0, 20, N_SWEEP).tolist()
AVG_NS = [4, 16, 64, 256]


def plot_average(beta=8.0):
    g = rng(3)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for n in AVG_NS:
        K, V = orthonormal_setup(n, 4, g)
        rows = [average_of_two(b_, K, V)[:3] for b_ in AVG_BETAS]
        (line,) = ax1.semilogy(AVG_BETAS, [r[0] for r in rows], label=f"n={n}")
        ax1.semilogy(AVG_BETAS, [r[2] for r in rows], ls="--", c=line.get_color())
    ax1.set(
        xlabel=r"$\beta$  ($q = \beta(k_a+k_b)$)",
        ylabel=r"$\|c - \frac{1}{2}(v_a+v_b)\|$",
        title="Error vs $\\beta$ (dashed: bound)",
    )
    ax1.legend()
    n_max = 256 if QUICK else 1024
    ns = sorted({int(x) for x in torch.logspace(math.log10(3), math.log10(n_max), N_SWEEP // 2).tolist()})
    rows = [average_of_two(beta, *orthonormal_setup(n, 4, g))[:3] for n in ns]
    ax2.loglog(ns, [r[0] for r in rows], marker=".", label="measured")
    ax2.loglog(ns, [r[1] for r in rows], ls=":", c="k", label=r"exact $\varepsilon\|\bar v_{rest} - m\|$")
    ax2.loglog(ns, [r[2] for r in rows], ls="--", label=r"bound $2\varepsilon\max_i\|v_i\|$")
    ax2.set(xlabel="number of keys $n$", ylabel="error", title=f"Error vs $n$ at $\\beta$={beta:g}")
    ax2.legend()
    fig.tight_layout()
    return fig


save_then_explore(
    plot_average,
    "01_average_of_two",
    question="Can one query average two values, and how large must it be?",
    caption="Error ||c - (v_a + v_b)/2|| for q = beta (k_a + k_b) with orthonormal keys. Left: against beta for "
    "four numbers of keys n (dashed: the bound 2 eps max ||v||). Right: against n at a fixed beta, with the exact formula.",
    beta=(0.0, 20.0, 0.5, 8.0),
)

# %% [markdown]
# The check confirms the derivation ($\alpha_a = \alpha_b = e^\beta/(2e^\beta+n-2)$, the exact error)
# and that with $n = 64$ keys, $\beta = 12$ brings the error under $10^{-3}\max_i\lVert v_i\rVert$
# (the formula above asks for $\beta \ge 11.03$). With $\beta$ too small, it fails.


# %% tags=["check"]
def check_average_of_two(beta, n, tol=1e-3, seed=SEED):
    K, V = orthonormal_setup(n, 4, torch.Generator().manual_seed(seed))
    err, exact, bound, alpha = average_of_two(beta, K, V)
    predicted = math.exp(beta) / (2 * math.exp(beta) + n - 2)
    assert abs(alpha[0] - predicted) < 1e-12 and abs(alpha[1] - predicted) < 1e-12, (
        "alpha_a, alpha_b differ from the derivation"
    )
    assert abs(err - exact) < 1e-12 + 1e-9 * exact, (
        f"measured error {err:.3e} differs from the exact formula {exact:.3e}"
    )
    assert err <= bound + 1e-15, f"measured error {err:.3e} exceeds the bound {bound:.3e}"
    assert err <= tol * V.norm(dim=-1).max(), f"beta={beta}, n={n}: error {err:.2e} is not within {tol:g} of max ||v||"


check_average_of_two(beta=12.0, n=64)

# %% [markdown]
# ## 4. Recovering $v_a$ from a sum with a projection
#
# **Question.** Attention often hands the next layer a *sum* $s = v_a + v_b$. Suppose every
# $v_a$ lives in a subspace $\mathcal{A}$ with orthonormal basis $A \in \mathbb{R}^{d\times p}$
# (columns), every $v_b$ in a subspace $\mathcal{B}$ with basis $B \in \mathbb{R}^{d\times r}$, and the
# two are orthogonal, $A^\top B = 0$. Which linear map $M$ gives $Ms = v_a$?
#
# **Math.** $M = AA^\top$, the orthogonal projector onto $\mathcal{A}$. Write $v_a = Ax$ and $v_b = By$:
#
# $$Ms = AA^\top A x + AA^\top B y = A(I)x + A(0)y = v_a .$$
#
# If the subspaces are not orthogonal the leak $AA^\top v_b$ survives. Tilt $\mathcal{B}$ towards
# $\mathcal{A}$: with $B_\theta = \sin\theta\,W + \cos\theta\,A_{:,1:r}$ (where $W$ is orthonormal and
# orthogonal to $A$, and $\theta = 90°$ is the orthogonal case) the leak is $\cos\theta\,A_{:,1:r}\,y$,
# so $\lVert Ms - v_a\rVert / \lVert v_b\rVert = |\cos\theta|$ exactly.

# %%
D4, P4, R4 = 8, 3, 2  # ambient dimension, dim of subspace A, dim of subspace B (R4 <= P4)
U4 = orthonormal_vectors(P4 + R4, D4, rng(4), dtype=DTYPE)  # (5, 8) orthonormal rows
basis_A = U4[:P4].T  # (8, 3) columns span A
W4 = U4[P4:].T  # (8, 2) orthogonal to A
M = basis_A @ basis_A.T  # (8, 8) projector onto A


def tilted_basis(theta):
    """Orthonormal basis of a subspace B at principal angle theta from A (theta = pi/2: orthogonal)."""
    return math.sin(theta) * W4 + math.cos(theta) * basis_A[:, :R4]  # (8, 2)


def recovery_errors(basis_A, basis_B, n_vectors=1_000, seed=SEED):
    """Relative errors ||M s - v_a|| / ||v_b|| over random v_a in A, v_b in B."""
    g = torch.Generator().manual_seed(seed)
    v_a = torch.randn(n_vectors, basis_A.shape[1], generator=g, dtype=DTYPE) @ basis_A.T  # (N, d)
    v_b = torch.randn(n_vectors, basis_B.shape[1], generator=g, dtype=DTYPE) @ basis_B.T  # (N, d)
    recovered = (v_a + v_b) @ (basis_A @ basis_A.T).T  # rows are M s
    return (recovered - v_a).norm(dim=-1) / v_b.norm(dim=-1)


print(f"orthogonal subspaces: worst relative error {recovery_errors(basis_A, W4).max():.1e}")

# %% [markdown]
# **What the plot shows.** The relative recovery error against the angle between the subspaces:
# zero at $90°$, and exactly $|\cos\theta|$ in between (each dot is the mean over random vectors; the
# line is the formula). $M$ recovers $v_a$ only as well as the subspaces are separated.

# %%
angles = torch.linspace(0, math.pi / 2, N_SWEEP).tolist()
leak = [recovery_errors(basis_A, tilted_basis(t), n_vectors=200).mean().item() for t in angles]
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.plot([math.degrees(t) for t in angles], leak, "o", ms=4, label=r"measured $\|Ms - v_a\| / \|v_b\|$")
ax.plot([math.degrees(t) for t in angles], [abs(math.cos(t)) for t in angles], "-", label=r"$|\cos\theta|$")
ax.set(
    xlabel=r"angle $\theta$ between subspaces $\mathcal{A}$ and $\mathcal{B}$ (degrees)",
    ylabel="relative error",
    title=r"Recovering $v_a$ from $v_a + v_b$ with $M = AA^\top$",
)
ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "01_subspace_recovery",
    question="How well does the projection M = A A^T recover v_a from v_a + v_b?",
    caption="Relative recovery error against the angle between the subspaces of v_a and v_b: measured (dots) "
    "and |cos theta| (line); exact recovery only when the subspaces are orthogonal.",
    numbers={"worst error at 90 degrees": recovery_errors(basis_A, W4).max()},
)
plt.show()


# %% tags=["check"]
def check_recover(basis_A, basis_B, tol=1e-10):
    errors = recovery_errors(basis_A, basis_B)
    assert errors.max() < tol, f"M s differs from v_a by {errors.max():.2e} of ||v_b||: are the subspaces orthogonal?"


def check_leak_formula(theta):
    errors = recovery_errors(basis_A, tilted_basis(theta))
    assert torch.allclose(errors, torch.full_like(errors, abs(math.cos(theta))), atol=1e-10), (
        "leak differs from |cos theta|"
    )


check_recover(basis_A, W4)
for t in angles:
    check_leak_formula(t)

# %% [markdown]
# ## 5. The drawback of a single head
#
# **Question.** Keys are rarely exact. Let the means $\mu_1,\dots,\mu_n$ be orthonormal and draw
# $k_i \sim \mathcal{N}(\mu_i, \alpha I)$ with a vanishingly small $\alpha$ (here $\alpha$ is a
# variance, not an attention weight). By item 3, $q = \beta(\mu_a + \mu_b)$ still gives
# $c \approx \tfrac12(v_a+v_b)$: the noise moves each score by only about $\beta\sqrt{2\alpha}$.
# Now let key $a$ vary in *length*: $\Sigma_a = \alpha I + \tfrac12\mu_a\mu_a^\top$. What does $c$ do?
#
# **Math.** Along $\mu_a$ the variance is now $\alpha + \tfrac12$, so $k_a \approx \gamma\,\mu_a$ with
# $\gamma \sim \mathcal{N}(1, \tfrac12)$: same direction, random length. The scores become
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
#
# `sample_keys` in `helpers.attention` draws such keys: `covariance="isotropic"` is
# $\Sigma_i = \alpha I$, and `"item5"` stretches key $a$ as above, adding $g\,\mu_a$ with
# $g \sim \mathcal{N}(0, \tfrac12)$ (whose covariance is $\tfrac12\mu_a\mu_a^\top$).

# %%
from helpers.attention import sample_keys

N_KEYS, D5, BETA, LOG10_ALPHA = 8, 16, 10.0, -6.0
A_IDX, B_IDX = 0, 1
mu = orthonormal_vectors(N_KEYS, D5, rng(5), dtype=DTYPE)  # (n, d) orthonormal means
V5 = orthonormal_vectors(N_KEYS, N_KEYS, rng(50), dtype=DTYPE)  # (n, n) orthonormal values: c . v_i reads off weight i


def total_variance(c):
    """tr Cov(c) = E ||c - E c||^2 over the Monte Carlo draws (rows of c)."""
    return c.var(dim=0).sum().item()


def single_head(keys, beta=BETA):
    """q = beta (mu_a + mu_b) against each draw of the keys (S, n, d). Returns c (S, n) and alpha (S, n)."""
    q = beta * (mu[A_IDX] + mu[B_IDX])  # (d,), broadcast over the S draws
    return attend(q, keys, V5)


def draw_keys(covariance, log10_alpha=LOG10_ALPHA, n_samples=N_MC, seed=5):
    return sample_keys(mu, 10.0**log10_alpha, n_samples, rng(seed), covariance=covariance, a=A_IDX)  # (S, n, d)


keys_iso, keys_stretch = draw_keys("isotropic"), draw_keys("item5")
c_iso, alpha_iso = single_head(keys_iso)
c_single, alpha_single = single_head(keys_stretch)
print(f"isotropic keys:   tr Cov(c) = {total_variance(c_iso):.2e}   mean alpha_a = {alpha_iso[:, A_IDX].mean():.3f}")
print(
    f"key a stretched:  tr Cov(c) = {total_variance(c_single):.2e}   "
    f"fraction with alpha_a > 0.9: {(alpha_single[:, A_IDX] > 0.9).double().mean():.2f}, "
    f"with alpha_a < 0.1: {(alpha_single[:, A_IDX] < 0.1).double().mean():.2f}"
)

# %% [markdown]
# **What the plot shows.** Left: the histogram of $\alpha_a$ over key draws. Isotropic keys give a
# spike at $\tfrac12$; the stretched key gives two spikes, at $0$ and $1$. Right: each draw's $c$
# projected on $v_a$ and $v_b$. Isotropic draws sit at the midpoint; stretched draws sit at the two
# ends. Try the sliders: a smaller $\beta$ softens the switch ($\sigma(\beta(\gamma-1))$ flattens), and a
# larger $\alpha$ spreads even the isotropic case.


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
        title=rf"Single head, $q=\beta(\mu_a+\mu_b)$, $\beta$={beta:g}",
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
    "01_single_head_swing",
    question="Why is one head fragile when a key's length varies?",
    caption="One head with q = beta (mu_a + mu_b). Left: histogram of alpha_a over key draws, isotropic keys "
    "(a spike at 1/2) and key a stretched (spikes at 0 and 1). Right: where the output c lands in the (v_a, v_b) plane.",
    beta=(1.0, 20.0, 0.5, BETA),
    log10_alpha=(-8.0, -1.0, 0.5, LOG10_ALPHA),
)


# %% tags=["check"]
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

# %% [markdown]
# ## 6. The benefit of two heads
#
# **Question.** Split the job: head 1 uses $q_1 = \beta\mu_a$, head 2 uses $q_2 = \beta\mu_b$, and
# $c = \tfrac12(c_1 + c_2)$. With isotropic keys, $c_1 \approx v_a$ and $c_2 \approx v_b$ (item 2),
# so $c \approx \tfrac12(v_a+v_b)$ as before. What happens with the stretched key?
#
# **Math.** Head 2 never looks at $k_a$: $q_2^\top k_a \approx \beta\gamma\,\mu_b^\top\mu_a = 0$, so
# $c_2 \approx v_b$ always. Head 1 scores $k_a$ at $\beta\gamma$ against about $0$ for the $n-1$ others:
#
# $$\alpha^{(1)}_a \approx \frac{e^{\beta\gamma}}{e^{\beta\gamma} + n - 1},$$
#
# which stays near $1$ *whatever the length of $k_a$*, as long as $\beta\gamma \gg \log(n-1)$. Each
# head compares its key only with keys that score about $0$, instead of racing two noisy keys
# against each other. Two heads do not remove the variance completely. When $k_a$ shrinks to almost
# nothing or flips sign ($\gamma < \log(n-1)/\beta$, probability
# $\Phi\big((\log(n-1)/\beta - 1)/\sqrt{1/2}\big)$), head 1 loses $v_a$. That is a tail event, not
# a coin flip.


# %%
def two_heads(keys, q1, q2):
    """c = (c1 + c2) / 2 for two heads over the same keys (S, n, d). Returns c (S, n), alpha1, alpha2."""
    c1, alpha1 = attend(q1, keys, V5)
    c2, alpha2 = attend(q2, keys, V5)
    return (c1 + c2) / 2, alpha1, alpha2


q1, q2 = BETA * mu[A_IDX], BETA * mu[B_IDX]
c_multi_iso, _, _ = two_heads(keys_iso, q1, q2)
c_multi, alpha1, _ = two_heads(keys_stretch, q1, q2)
predicted_miss = 0.5 * (1 + math.erf((math.log(N_KEYS - 1) / BETA - 1) / math.sqrt(0.5) / math.sqrt(2)))
print(
    f"isotropic keys: two heads tr Cov(c) = {total_variance(c_multi_iso):.2e}, "
    f"max ||c - (v_a+v_b)/2|| = {(c_multi_iso - (V5[A_IDX] + V5[B_IDX]) / 2).norm(dim=-1).max():.1e}"
)
print(
    f"stretched key:  single head {total_variance(c_single):.3f}  vs  two heads {total_variance(c_multi):.3f}"
    f"  ({total_variance(c_single) / total_variance(c_multi):.0f}x smaller)"
)
print(
    f"head 1 misses v_a (alpha1_a < 1/2) in {(alpha1[:, A_IDX] < 0.5).double().mean():.1%} of draws; "
    f"predicted {predicted_miss:.1%}"
)

# %% [markdown]
# **What the plot shows.** Left: the coefficient $c\cdot v_a$ over key draws. With one head it is
# $0$ or $1$. With two heads it sits at the target $\tfrac12$ except in the small tail where $k_a$
# nearly vanishes. Middle: where $c$ lands, as in item 5. Right: the total variance of $c$ on a log
# scale. Isotropic keys give almost none either way; with the stretched key, two heads cut the
# variance by more than an order of magnitude.


# %%
def plot_multi_head(beta=BETA, log10_alpha=LOG10_ALPHA):
    keys_i, keys_s = draw_keys("isotropic", log10_alpha), draw_keys("item5", log10_alpha)
    qa, qb = beta * mu[A_IDX], beta * mu[B_IDX]
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
    question="Do two heads fix what one head cannot?",
    caption="One head against two heads (q1 = beta mu_a, q2 = beta mu_b) with key a stretched: the coefficient "
    "of v_a in c (left), where c lands (middle) and the total variance of c over key draws (right, log scale).",
    beta=(1.0, 20.0, 0.5, BETA),
    log10_alpha=(-8.0, -1.0, 0.5, LOG10_ALPHA),
)


# %% tags=["check"]
def check_multi_head(keys, q1, q2, factor=5.0):
    """Two heads (q1, q2) must cut tr Cov(c) by `factor` against the single head q = beta (mu_a + mu_b)."""
    single = total_variance(single_head(keys)[0])
    multi = total_variance(two_heads(keys, q1, q2)[0])
    assert multi * factor < single, (
        f"two heads: tr Cov(c) = {multi:.3f}, single head {single:.3f}: less than {factor:g}x smaller"
    )


check_single_head_averages(c_multi_iso)  # with isotropic keys two heads still average
check_multi_head(keys_stretch, q1, q2)

# %% [markdown]
# ## 7. Key, query and value projections in self-attention
#
# **Question.** In self-attention the inputs $x_1, \dots, x_T$ are keys, queries and values at once.
# Let $u_a, u_b, u_c, u_d$ be mutually orthogonal with norm $\beta$ (large), and
#
# $$x_1 = u_d + u_b, \qquad x_2 = u_a, \qquad x_3 = u_c + u_b .$$
#
# (i) Without projections ($q_i = k_i = v_i = x_i$), what is $c_2$? Can adding $u_d$ or $u_c$ to $x_2$
# make $c_2 \approx u_b$? (ii) Find matrices with $v_i = Vx_i$, $k_i = Kx_i$, $q_i = Qx_i$ giving
# $c_2 \approx u_b$ and $c_1 \approx u_b - u_c$.
#
# **Math (i).** $x_2 = u_a$ is orthogonal to $x_1$ and $x_3$, so its scores are
# $(0, \beta^2, 0)$. The query attends to *itself* and $c_2 \approx x_2 = u_a$. Adding
# $s\,u_c + t\,u_d$ to $x_2$ (any real $s, t$) gives scores $x_2^\top x_1 = t\beta^2$,
# $x_2^\top x_2 = (1 + s^2 + t^2)\beta^2$ and $x_2^\top x_3 = s\beta^2$. The self-score beats the other
# two by $(1 - t + t^2 + s^2)\beta^2$ and $(1 - s + s^2 + t^2)\beta^2$, both at least $\tfrac34\beta^2$
# (since $1 - s + s^2 \ge \tfrac34$). So $c_2 \approx x_2$, which still contains $u_a$ and never equals
# $u_b$. Without projections a token mostly attends to itself.
#
# **Math (ii).** Choose what each role sees. Values keep $u_b$ and flip $u_c$:
# $V = (u_bu_b^\top - u_cu_c^\top)/\beta^2$, so $v_1 = u_b$, $v_2 = 0$, $v_3 = u_b - u_c$. Keys stay as
# they are, $K = I$. Queries route $x_2 \mapsto u_d$ (which only $k_1$ contains) and $x_1 \mapsto u_c$
# (which only $k_3$ contains): $Q = (u_du_a^\top + u_cu_d^\top)/\beta^2$. Then $q_2 = u_d$ scores
# $(\beta^2, 0, 0)$ and $c_2 \approx v_1 = u_b$; $q_1 = u_c$ scores $(0, 0, \beta^2)$ and
# $c_1 \approx v_3 = u_b - u_c$.


# %%
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


for name, x2 in variants.items():
    print(
        f"{name:22s} c2 in (u_a, u_b, u_c, u_d): {[round(v, 3) + 0.0 for v in coords(c2_no_projection(x2)).tolist()]}"
    )

# %% [markdown]
# The projections of (ii), written as matrices acting on column vectors. In row form the weights
# are their transposes ($q_i^\top = x_i^\top Q^\top$):

# %%
outer = torch.outer
Q7 = (outer(u_d, u_a) + outer(u_c, u_d)) / BETA7**2
K7 = I8.clone()
V7 = (outer(u_b, u_b) - outer(u_c, u_c)) / BETA7**2
c_proj, alpha_proj = self_attend(X7, Q7.T, K7.T, V7.T)
print("attention weights (row i = query x_i):\n", alpha_proj.numpy().round(4))
print("c1 coords:", [round(v, 4) + 0.0 for v in coords(c_proj[0]).tolist()], " target u_b - u_c = [0, 1, -1, 0]")
print("c2 coords:", [round(v, 4) + 0.0 for v in coords(c_proj[1]).tolist()], " target u_b = [0, 1, 0, 0]")

# %% [markdown]
# `self_attend` is `helpers.attention.self_attention` (which defaults to the scaled scores of item 9;
# here we pass `scale=1.0`). The check below holds them equal.
#
# **What the plot shows.** Left: the coordinates of $c_2$ in the basis $(u_a, u_b, u_c, u_d)$ for each
# way of padding $x_2$ without projections, then with $V, K, Q$, then the target; below the line, $c_1$
# with $V, K, Q$ and its target $u_b - u_c$. Only the projected rows match their targets. Right: the attention pattern the projections create: $x_1$ reads $x_3$ and
# $x_2$ reads $x_1$.


# %%
def plot_kqv(beta=BETA7):
    scale = beta / BETA7  # rescale the u's to norm beta; the projections are rebuilt for that norm
    X = scale * X7
    Q, K, V = Q7 / scale**2, K7, V7 / scale**2
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
    "x_2), with the constructed V, K, Q, and the target u_b; below the line c_1 with V, K, Q and its target "
    "u_b - u_c. Right: the attention weights the projections create.",
    beta=(0.5, 10.0, 0.5, BETA7),
)

# %% tags=["check"]
from helpers.attention import self_attention


def check_cannot_reach_ub(c2_of, candidates):
    """Without projections, no candidate x2 gets c2 within beta/2 of u_b."""
    for name, x2 in candidates.items():
        dist = (c2_of(x2) - u_b).norm()
        assert dist > BETA7 / 2, f"{name}: c2 is within {dist:.2e} of u_b"


def check_construction(Q, K, V, tol=1e-4):
    """With the projections, c2 = u_b and c1 = u_b - u_c up to tol * beta."""
    c, _ = self_attend(X7, Q.T, K.T, V.T)
    assert (c[1] - u_b).norm() < tol * BETA7, f"c2 is {(c[1] - u_b).norm():.2e} away from u_b"
    assert (c[0] - (u_b - u_c)).norm() < tol * BETA7, f"c1 is {(c[0] - (u_b - u_c)).norm():.2e} away from u_b - u_c"
    c_ref, _ = self_attention(X7, Q.T, K.T, V.T, scale=1.0)
    assert torch.allclose(c, c_ref, atol=1e-12), "self_attend differs from helpers.attention.self_attention"


check_cannot_reach_ub(c2_no_projection, variants)
check_construction(Q7, K7, V7)

# %% [markdown]
# ## 8. Self-attention ignores order, unless we add positions
#
# **Question.** Does self-attention know the order of its inputs?
#
# **Math.** Let $\Pi$ be a permutation matrix, acting on the rows of $X \in \mathbb{R}^{T\times d}$, and
# $\mathrm{Attn}(X) = \operatorname{softmax}\!\big(XW_q (XW_k)^\top/\sqrt{d_k}\big)\,XW_v$. The scores of
# $\Pi X$ are $\Pi S \Pi^\top$. A row-wise softmax does not care how the entries of a row are ordered,
# so $\operatorname{softmax}(\Pi S \Pi^\top) = \Pi\,\operatorname{softmax}(S)\,\Pi^\top$. Since $\Pi^\top\Pi = I$:
#
# $$\mathrm{Attn}(\Pi X) = \Pi\,\operatorname{softmax}(S)\,\Pi^\top\,\Pi X W_v = \Pi\,\mathrm{Attn}(X).$$
#
# Self-attention is *permutation equivariant*. Shuffle the words and you shuffle the outputs the
# same way, so "the dog bit the man" and "the man bit the dog" give "dog" the same vector. Adding
# position encodings $P$ (attached to slots, not to tokens) breaks this:
# $\mathrm{Attn}(\Pi X + P) \ne \Pi\,\mathrm{Attn}(X + P) = \mathrm{Attn}(\Pi X + \Pi P)$ because
# $\Pi P \ne P$. We use the sinusoidal encodings of Vaswani et al.
# (`helpers.model.sinusoidal_table`, the table the model of notebooks 02 and 03 uses); notebook 02
# explains them properly.

# %%
from helpers.model import sinusoidal_table

T8, D_MODEL8, D_K8 = 6, 16, 8
g8 = rng(8)
X8 = torch.randn(T8, D_MODEL8, generator=g8, dtype=DTYPE)  # (T, d_model)
Wq8, Wk8, Wv8 = (torch.randn(D_MODEL8, D_K8, generator=g8, dtype=DTYPE) for _ in range(3))  # (d_model, d_k)
P8 = sinusoidal_table(T8, D_MODEL8, dtype=DTYPE)  # (T, d_model)


def attn_plain(X):
    return self_attend(X, Wq8, Wk8, Wv8, scale=1 / math.sqrt(D_K8))[0]


def attn_with_positions(X):
    return self_attend(X + P8[: len(X)], Wq8, Wk8, Wv8, scale=1 / math.sqrt(D_K8))[0]


def equivariance_gaps(attn_fn, X, perms):
    """max |Attn(X[perm]) - Attn(X)[perm]| for each permutation."""
    return [(attn_fn(X[p]) - attn_fn(X)[p]).abs().max().item() for p in perms]


perms8 = [p for p in (torch.randperm(T8, generator=g8) for _ in range(60)) if not torch.equal(p, torch.arange(T8))][:40]

vocab = {w: torch.randn(D_MODEL8, generator=g8, dtype=DTYPE) for w in ["the", "dog", "bit", "man"]}
s1, s2 = "the dog bit the man".split(), "the man bit the dog".split()
E1, E2 = torch.stack([vocab[w] for w in s1]), torch.stack([vocab[w] for w in s2])
for name, fn in [("without positions", attn_plain), ("with positions", attn_with_positions)]:
    diff = (fn(E1)[s1.index("dog")] - fn(E2)[s2.index("dog")]).norm()
    print(f"{name:18s}: ||out('dog' in s1) - out('dog' in s2)|| = {diff:.1e}")

# %% [markdown]
# **What the plot shows.** For 40 random shuffles of six inputs, the largest entry of
# $|\mathrm{Attn}(\Pi X) - \Pi\,\mathrm{Attn}(X)|$ on a log scale. Without positions it sits at
# float64 rounding ($\sim 10^{-16}$); with sinusoidal positions it is of order one.

# %%
gaps_plain = equivariance_gaps(attn_plain, X8, perms8)
gaps_pos = equivariance_gaps(attn_with_positions, X8, perms8)
fig, ax = plt.subplots(figsize=(7, 3.8))
ax.semilogy(gaps_plain, "o", ms=4, label="no positions")
ax.semilogy(gaps_pos, "s", ms=4, label="sinusoidal positions added")
ax.set(
    xlabel="random permutation $\\Pi$",
    ylabel=r"$\max|\mathrm{Attn}(\Pi X) - \Pi\,\mathrm{Attn}(X)|$",
    title=f"Permutation equivariance of self-attention (T={T8})",
)
ax.set_ylim(1e-18, 1e2)
ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "01_permutation_equivariance",
    question="Does self-attention know the order of its inputs?",
    caption="Largest entry of |Attn(Pi X) - Pi Attn(X)| for 40 random permutations Pi of six inputs (log scale): "
    "at float64 rounding without positions, of order one with sinusoidal positions added.",
    numbers={"largest gap without positions": max(gaps_plain), "smallest gap with positions": min(gaps_pos)},
)
plt.show()


# %% tags=["check"]
def check_equivariant(attn_fn, X=X8, perms=perms8):
    worst = max(equivariance_gaps(attn_fn, X, perms))
    assert worst < 1e-10, f"Attn(PX) differs from P Attn(X) by {worst:.2e}: not permutation equivariant"


def check_order_sensitive(attn_fn, X=X8, perms=perms8):
    least = min(equivariance_gaps(attn_fn, X, perms))
    assert least > 1e-3, f"some shuffle changes the output by only {least:.2e}: the layer ignores order"


check_equivariant(attn_plain)
check_order_sensitive(attn_with_positions)

# %% [markdown]
# ## 9. Why scores are divided by $\sqrt{d_k}$ · Exercise 1.4 (2 points)
#
# **Question.** Transformers use $\operatorname{softmax}(QK^\top/\sqrt{d_k})$. Why the $\sqrt{d_k}$?
#
# **Math.** Let $q, k \in \mathbb{R}^d$ have independent entries with mean $0$ and variance $1$. Then
# $q^\top k = \sum_{l=1}^d q_l k_l$ is a sum of $d$ independent terms of mean $0$ and variance
# $\mathbb{E}[q_l^2]\,\mathbb{E}[k_l^2] = 1$, so
#
# $$\operatorname{Var}(q^\top k) = d, \qquad \operatorname{Var}\!\big(q^\top k/\sqrt{d}\big) = 1 .$$
#
# Unscaled, the scores spread like $\sqrt d$, so the gap between the largest and the second score
# grows and the softmax *saturates* (the top weight goes to 1). A saturated softmax passes back
# almost no gradient. Its Jacobian is
#
# $$\frac{\partial \alpha}{\partial s} = \operatorname{diag}(\alpha) - \alpha\alpha^\top ,$$
#
# whose entries $\alpha_i(\delta_{ij} - \alpha_j)$ all vanish when $\alpha$ is one-hot. The queries and
# keys then stop learning. Dividing by $\sqrt d$ keeps the scores at unit variance for every $d$.


# %%
def score_scale(d):
    """The factor to multiply q.k by so that the scores have variance 1 in every dimension d."""
    return 1 / math.sqrt(d)  # SOLUTION


def score_stats(d, scale, n_keys=16, n_trials=N_TRIALS, seed=9):
    """Score variance, mean top weight and median softmax-Jacobian norm for random q, K in R^d."""
    g = torch.Generator().manual_seed(seed + d)
    q = torch.randn(n_trials, 1, d, generator=g, dtype=DTYPE)  # (R, 1, d)
    K = torch.randn(n_trials, n_keys, d, generator=g, dtype=DTYPE)  # (R, n, d)
    scores = scale * (q @ K.transpose(-2, -1)).squeeze(1)  # (R, n)
    alpha = torch.softmax(scores, dim=-1)
    jac = torch.diag_embed(alpha) - alpha[:, :, None] * alpha[:, None, :]  # (R, n, n)
    # the median: the mean is carried by the few queries that happen to meet two near-tied keys
    return scores.var().item(), alpha.max(dim=-1).values.mean().item(), jac.norm(dim=(-2, -1)).median().item()


# the closed-form Jacobian is what autograd computes
s_test = torch.randn(5, generator=rng(9), dtype=DTYPE)
a_test = torch.softmax(s_test, -1)
assert torch.allclose(
    torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), s_test),
    torch.diag(a_test) - torch.outer(a_test, a_test),
    atol=1e-12,
)

DIMS = [2**e for e in range(1, 11)]
unscaled = [score_stats(d, 1.0) for d in DIMS]
scaled = [score_stats(d, score_scale(d)) for d in DIMS]
for d, u, s in zip(DIMS[::3], unscaled[::3], scaled[::3]):
    print(
        f"d={d:5d}  unscaled: var {u[0]:7.1f}, top weight {u[1]:.3f}, |J| {u[2]:.1e}   scaled: var {s[0]:.2f}, top weight {s[1]:.3f}, |J| {s[2]:.2f}"
    )

# %% [markdown]
# **What the plot shows.** Left: the measured score variance follows the line $d$ unscaled, and stays
# at $1$ scaled. Middle: the mean top weight of 16 keys climbs to $1$ unscaled, and stays flat
# scaled. Right: the norm of the softmax Jacobian (the gradient that reaches the scores) for a
# typical query (the median over draws). Unscaled it collapses by orders of magnitude by $d = 1024$;
# scaled it stays constant. (The *mean* falls less steeply, because a few queries happen to meet two
# nearly tied keys and keep a gradient.)

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
for stats, label, marker in [(unscaled, r"$q\cdot k$", "o"), (scaled, r"$q\cdot k/\sqrt{d}$", "s")]:
    for ax, i in zip(axes, range(3)):
        ax.plot(DIMS, [s[i] for s in stats], marker=marker, ms=4, label=label)
axes[0].plot(DIMS, DIMS, ls="--", c="gray", label="$d$")
axes[0].set(
    xscale="log", yscale="log", xlabel="dimension $d$", ylabel="Var(score)", title="Score variance grows like $d$"
)
axes[1].set(
    xscale="log",
    xlabel="dimension $d$",
    ylabel=r"mean $\max_i \alpha_i$",
    title="The softmax saturates (16 keys)",
    ylim=(0, 1.05),
)
axes[2].set(
    xscale="log",
    yscale="log",
    xlabel="dimension $d$",
    ylabel=r"median $\|\partial\alpha/\partial s\|_F$",
    title="...and its gradient vanishes",
)
for ax in axes:
    ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "01_scaling_sqrt_dk",
    question="Why are the scores divided by sqrt(d_k)?",
    caption="Random q and 16 keys in R^d, scores q.k unscaled and divided by sqrt(d): score variance (left), "
    "mean top weight (middle) and the median norm of the softmax Jacobian (right), against d.",
    numbers={
        "Var(score) unscaled at d=1024": unscaled[-1][0],
        "Var(score) scaled at d=1024": scaled[-1][0],
        "top weight unscaled at d=1024": unscaled[-1][1],
    },
)
plt.show()


# %% tags=["check"]
def check_score_variance(scale_fn, dims=DIMS, rel_tol=0.2):
    """Var(scale(d) * q.k) must equal d (unscaled: the claim Var(q.k) = d) to within rel_tol."""
    for d in dims:
        var = score_stats(d, scale_fn(d))[0]
        assert abs(var / d - 1) < rel_tol, f"d={d}: Var(score) = {var:.2f}, expected about d = {d}"


def check_scaling_keeps_gradients(scale_fn, d_small=4, d_big=1024):
    """With scores scaled by scale_fn(d), a large d must neither saturate the softmax nor kill its gradient."""
    _, top_small, jac_small = score_stats(d_small, scale_fn(d_small))
    _, top_big, jac_big = score_stats(d_big, scale_fn(d_big))
    assert top_big < 0.9, f"d={d_big}: mean top weight {top_big:.3f}, the softmax saturates"
    assert jac_big > 0.5 * jac_small, (
        f"d={d_big}: softmax gradient {jac_big:.2e} vs {jac_small:.2e} at d={d_small}, it vanishes"
    )


def check_unit_variance(scale_fn, dims=DIMS, rel_tol=0.2):
    """Scaled by scale_fn(d), the scores must have variance 1 (to within rel_tol) in every dimension."""
    for d in dims:
        var = score_stats(d, scale_fn(d))[0]
        assert abs(var - 1) < rel_tol, f"d={d}: Var(scale(d) * q.k) = {var:.2f}, expected 1"


check_score_variance(lambda d: 1.0)
check_unit_variance(score_scale)
check_scaling_keeps_gradients(score_scale)

# %% [markdown]
# ## Summary
#
# | item | claim | check |
# |---|---|---|
# | 1 | $\alpha$ is a distribution at any scale (softmax subtracts the max) | `check_categorical` |
# | 2 | $q = s\,k_j$ copies $v_j$, error $\le (n-1)e^{-s\Delta}\max\lVert v_i - v_j\rVert$ | `check_copying` |
# | 3 | $q = \beta(k_a+k_b)$ averages, error $= \varepsilon\lVert\bar v_{\text{rest}} - m\rVert \le 2\varepsilon\max\lVert v\rVert$ | `check_average_of_two` |
# | 4 | $M = AA^\top$ recovers $v_a$ from $v_a+v_b$ iff the subspaces are orthogonal (leak $\lvert\cos\theta\rvert$) | `check_recover` |
# | 5 | one head swings between $v_a$ and $v_b$ when $\lVert k_a\rVert$ varies | `check_single_head_swings` |
# | 6 | two heads ($\beta\mu_a$, $\beta\mu_b$) cut that variance by over an order of magnitude | `check_multi_head` |
# | 7 | without projections $x_2$ attends to itself; chosen $V, K, Q$ give $c_2 \approx u_b$, $c_1 \approx u_b - u_c$ | `check_construction` |
# | 8 | self-attention is permutation equivariant; positions break that | `check_equivariant` |
# | 9 | $\operatorname{Var}(q^\top k) = d$; dividing by $\sqrt d$ keeps the softmax and its gradient alive | `check_scaling_keeps_gradients` |
#
# The package versions of what you wrote here live in `helpers/attention.py`: `attention` (your
# `attend`, plus an optional scale and mask), `self_attention`, `orthonormal_vectors` and `sample_keys`;
# the position table is `helpers.model.sinusoidal_table`.
#
# **Next, notebook 02** assembles these pieces into a Transformer: several heads side by side (item 6),
# scaled scores (item 9), positional encodings to restore order (item 8), and projections that decide
# what each token asks for and offers (item 7).

# %% [markdown]
# ## Export for your report
#
# One call gathers every figure so far (PDF and PNG), every metrics file, and a generated `index.md` with each
# figure's title, the question it answers, its caption, the numbers behind it and a LaTeX snippet to paste,
# into `reports/report.zip`. On Colab the zip is saved to Google Drive when Drive is mounted, and offered for
# download: closing the tab then loses nothing. From a terminal: `python -m helpers report`.

# %%
from helpers import report  # noqa: E402

report.export()

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
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/05_research_variants.ipynb) [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/05_research_variants.ipynb)
#
# **Solutions**: the solved notebook, with model answers and grading rubrics. Learners start from the exercise version, [`notebooks/05_research_variants.ipynb`](https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/05_research_variants.ipynb).

# %% [markdown]
# # 05 · Research variants: other attentions, a bottleneck, positions, pretraining, and a hyperparameter study
#
# Notebooks 02 and 03 built one Transformer and trained it to translate. This notebook changes **one thing at
# a time** and measures what the change does, with the plain model of notebook 02 as the reference row of
# every table. First you build the pieces (sections 1–4: four exercises, 13 points), then every variant is
# trained at the same budget (sections 5–8):
#
# 1. **Synthesizer attention**: scores that come from the query alone, with no keys (Exercise 5.1).
# 2. **A Perceiver-style bottleneck**: the sequence squeezed into *m* latent vectors; how to keep it causal
#    (Exercise 5.2), and what it saves (time and memory derived, then measured).
# 3. **Positions inside attention**: why notebook 02's rotary rotation scores by distance (a question), and ALiBi's
#    distance penalty (Exercise 5.3).
# 4. **Span corruption**: a pretraining example cut from one unpaired sentence (Exercise 5.4).
# 5. **The attention variants trained** at the same budget.
# 6. **Positions and embeddings trained**: rotary (the plain model's), none, learned, sinusoidal, ALiBi; token
#    embeddings started from a pretrained language model's.
# 7. **Span-corruption pretraining** on unpaired sentences, then translation from 1k, 5k, 20k or all pairs.
# 8. **A hyperparameter study** that you design within a budget of runs (not "train longer": every setting gets
#    the same minutes), and the paragraph that reports it, which you write.
# 9. **Levers from the speed records**: those the recipe keeps and those that lost here, each one switch of the same
#    model.
#
# Each **Question 5.N** has a *Your answer* cell for your report, and a code cell under it where you compute
# what supports your answer.
#
# Every variant is one switch of the same model (`helpers.nn.model.ModelConfig`), and one switch of the same command:
# `python -m helpers train --attention synthesizer --positions learned`, `--bottleneck-dim 16 --positions learned`,
# `--positions alibi`,
# `--pretrain span`, `--parallel-pairs 5000`. Each variant passes the tests the plain model passes (`tests/nn/test_model.py`
# runs the same tests on each).
#
# **How every row is scored.** Same data, tokenizer, seed and budget; only the named setting changes. Settings
# are *chosen* on the validation split (`BLEU valid`); the new-sentence test set (`BLEU new`, sentences unlike
# the training file, the score that says what a user meets) is reported beside it and never used to choose.
#
# **How to run.** On Colab with a T4, *Run all* (about 60 to 75 minutes, an estimate not yet measured on a T4:
# 15 runs of 3 minutes, plus the 3 to 6 of your study in section 8, plus scoring); say yes to Google Drive and each finished row is kept there, so a
# disconnect costs at most the row in progress. Quick mode (`python -m helpers run-notebooks --only 05`, the
# tests) runs every code path on the synthetic built-in corpus with tiny models in a few minutes on two CPU
# cores: its numbers say that the code runs and learns, not which variant is better.
#
# Figures go to `reports/figures/05_*.pdf` and `.png`, every row to `reports/metrics/05_variants.json`.

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
# Budgets. Quick mode: the tiny preset for a few dozen steps per row. Full mode: minutes per row.
import json
import math
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from helpers import experiments
from helpers.course import plotting, probes
from helpers.evaluation import evaluate
from helpers.hf import loading, tiny
from helpers.nn import build_model, variants
from helpers.nn.model import ModelConfig, SelfAttention, build_attention_mask
from helpers.nn.variants import num_parameters  # counts any variant (helpers.nn.model's counts notebook 02's alone)
from helpers.text import data, sources
from helpers.training import config, pretrain

DEVICE = runtime.pick_device()
PRESET = "tiny" if QUICK else ("t4" if DEVICE.type == "cuda" else "cpu")
BUDGET = {"steps": 60} if QUICK else {"minutes": 3.0}  # the same for every row of every table
DATA_LIMIT = 6000 if QUICK else None  # pairs of the built-in corpus in quick mode; None = all of Tatoeba
EVAL_SENTENCES = 100 if QUICK else 1000  # first sentences of the validation split and of the new-sentence set
if QUICK:
    torch.set_num_threads(1)  # tiny models: a second thread only waits (see notebook 03)
DRIVE = None if QUICK else colab.mount_drive(ask=True)
BUDGET_TEXT = f"{BUDGET['steps']} steps" if "steps" in BUDGET else f"{BUDGET['minutes']:g} min"
print(f"preset {PRESET!r} on {runtime.hardware_name(DEVICE)}; {BUDGET_TEXT} per row")


reference = runtime.reference_outputs  # outputs saved for the checks (data/reference/*.json)


# %% [markdown]
# The data and tokenizer of notebook 03, prepared in one call (`helpers.text.data.prepare_data`: load, clean, split
# with the new-sentence test set held out first, tokenizer on the training split only, encode, batch).

# %%
DATA = "builtin" if QUICK else str(sources.find_local_tatoeba() or sources.fetch_tatoeba(cache_dir=DRIVE))
# Every row builds on notebook 02's model, rotary positions, on every preset: the `t4` preset's own default is a
# learned table (notebook 03's GPU run), which would make section 6's "vanilla" row the same run as its "learned" one
BASE_SETTINGS = {"seed": SEED, "positional": "rotary", **BUDGET}
BASE = config.preset_config(PRESET, **BASE_SETTINGS)
prepared = data.prepare_data(DATA, BASE, None, seed=SEED, limit=DATA_LIMIT, progress=False)
tok = prepared.tokenizer
print(prepared.describe())
# finished rows survive a disconnect in full mode (Drive if mounted); quick mode always recomputes
CACHE = experiments.ResultsCache(None if QUICK else runtime.reports_dir() / "05_rows.json")
FINGERPRINT = {"data": prepared.info, "base": BASE.to_dict()}
ROWS: dict[str, dict] = {}  # every row of every table, for 05_variants.json


def run_row(label: str, **changes) -> dict:
    """Train BASE with `changes` for the same budget and score it (helpers.experiments.run_variant)."""
    cfg = config.preset_config(PRESET, **{**BASE_SETTINGS, **changes})  # a setting may change the seed
    row = CACHE.run(
        label,
        {**FINGERPRINT, "changes": changes},
        lambda: experiments.run_variant(
            prepared, cfg, label=label, base=BASE, device=DEVICE, eval_sentences=EVAL_SENTENCES
        ),
    )
    ROWS[label] = row
    print(
        f"{label:<24} {row['parameters']:>9,} parameters  {row['steps']:>5} steps  val loss {row['val_loss']:.3f}  "
        f"BLEU valid {row['bleu_valid']:5.2f}  new {row['bleu_new']:5.2f}"
    )
    return row


# %% [markdown]
# ## 1. Synthesizer attention · Exercise 5.1 (3 points)
#
# Dot-product attention decides where query *t* looks by comparing it with every key: $q_t \cdot k_j$. The
# **synthesizer** (Tay et al., 2021, the dense synthesizer; the CS224N version) skips the comparison. Each head
# *i* turns $x_t$ alone into one score per *position* of the block: a linear map of $x_t$ to the head's size
# (`w1`, with its bias, shared by the heads and then split among them), a ReLU, and a second linear map from the
# head's size to $\ell$ = `max_len` scores (the head's slice of `w2`, with its bias `b2`). Column *j* of the scores
# is "how much to read position *j*", so a sequence of length *T* uses the first *T* columns, masked exactly as
# dot-product scores are (causal for the English, both directions within the French); the values and the output
# projection are the usual ones.
#
# Write the weights of all heads below; the cell checks them against the package's layer with the same weights.


# %%
def synthesizer_weights(x, w1, w2, b2, n_head, mask):
    """x (B, T, C) -> attention weights (B, nh, T, T); w1: nn.Linear(C, C), w2 (nh, hs, L), b2 (nh, L)."""
    B, T, C = x.shape
    # BEGIN SOLUTION
    h = torch.relu(w1(x)).view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs): ReLU(X A_i + b1)
    scores = h @ w2[:, :, :T] + b2[:, None, :T]  # (B, nh, T, T): one score per key *position*
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # over the keys
    # END SOLUTION


# %% tags=["check"]
def synthesizer_case(seed):
    """A layer's w1, w2, b2 drawn from `seed` (b2 non-zero, so a forgotten b2 shows), an input x (2, 9, 16), the
    same input with token 2 changed, and the mask of a 4- and a 6-token source."""
    g = torch.Generator().manual_seed(seed)
    w1 = {"weight": torch.randn(16, 16, generator=g) * 0.5, "bias": torch.randn(16, generator=g) * 0.5}
    w2, b2, x = torch.randn(2, 8, 16, generator=g), torch.randn(2, 16, generator=g), torch.randn(2, 9, 16, generator=g)
    y = x.clone()
    y[:, 2] += 1.0
    return w1, w2, b2, x, y, build_attention_mask(9, torch.tensor([4, 6]))


def synthesizer_config():
    return ModelConfig(vocab_size=50, max_len=16, n_layer=2, n_head=2, d_model=16, attention="synthesizer")


def synthesizer_layer(seed):
    """The package's synthesizer layer (d_model 16, 2 heads, ℓ = 16) holding the case's w1, w2 and b2."""
    w1, w2, b2, *_ = synthesizer_case(seed)
    layer = variants.SynthesizerAttention(synthesizer_config()).eval()
    layer.w1.load_state_dict(w1)
    with torch.no_grad():
        layer.w2.copy_(w2)
        layer.b2.copy_(b2)
    return layer


def probe_synthesizer(weights_fn, seed=0):
    """Runs your function on the case drawn from `seed`, and on the input with token 2 changed."""
    w1_weights, w2, b2, x, y, mask = synthesizer_case(seed)
    w1 = torch.nn.Linear(16, 16)
    w1.load_state_dict(w1_weights)
    with torch.no_grad():
        return {"weights": weights_fn(x, w1, w2, b2, 2, mask), "moved": weights_fn(y, w1, w2, b2, 2, mask)}


def verify_synthesizer(values, seed=0):
    """Against the package's layer holding the same weights; rows sum to 1, masked keys get 0, and a row is
    computed from its own token alone."""
    *_, x, y, mask = synthesizer_case(seed)
    layer = synthesizer_layer(seed)
    layer.keep_weights = True  # weights kept only when asked; then .last_weights is (B, nh, T, T)
    theirs = []
    with torch.no_grad():
        for z in (x, y):  # the weights for x, then for y (token 2 changed)
            layer(z, mask)
            theirs.append(layer.last_weights)
    mine, moved = values["weights"], values["moved"]
    for got in (mine, moved):
        assert tuple(got.shape) == (2, 2, 9, 9), f"weights (B, nh, T, T) = (2, 2, 9, 9), got {tuple(got.shape)}"
    assert probes.close(mine, theirs[0], atol=1e-6), "the notebook's synthesizer and helpers.nn.variants disagree"
    assert probes.close(mine.sum(-1), torch.ones(2, 2, 9)) and (mine.masked_select(~mask.expand_as(mine)) == 0).all()
    # which tokens a row of weights is computed from: token 2 changed, row 2 moves and the rows after it do not
    assert probes.close(moved[:, :, 3:], mine[:, :, 3:]) and not probes.close(moved[:, :, 2], mine[:, :, 2]), (
        "a row of weights comes from its own token alone: with token 2 changed, row 2 moves and the later rows do not"
    )
    assert probes.close(moved, theirs[1], atol=1e-6), (
        "with token 2 changed, the notebook's synthesizer and helpers.nn.variants disagree"
    )


verify_synthesizer(probe_synthesizer(synthesizer_weights))
small, layer, x = synthesizer_config(), synthesizer_layer(0), synthesizer_case(0)[3]  # what the cells below use
dot = ModelConfig(**{**small.to_dict(), "attention": "dot"})
print(
    f"parameters per attention layer: dot product {variants.num_variant_parameters(dot)['attention']:,}, "
    f"synthesizer {variants.num_variant_parameters(small)['attention']:,} (w2 and b2 grow with the block length ℓ)"
)

# %% [markdown]
# **Generation.** A key/value cache works because an earlier position's key and value never change. The
# synthesizer has no keys, so `generate` recomputes the whole sequence at each step for it (`supports_cache` is
# False), and `tests/nn/test_generate.py` checks that this gives the same tokens as decoding one sentence at a time.

# %% [markdown]
# ### What a synthesizer head can learn

# %% [markdown] tags=["question"]
# **Question 5.1 (2 points).** A synthesizer head computes where query *t* looks from $x_t$ alone. Can it learn (a) to
# read the previous token, (b) to read the earlier position that holds the same word as the query (to copy a
# name, say)? For (a), what must $x_t$ contain? Support your answer with the cell below.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A working example: the weights with which query 5 reads positions 1
# and 3, before and after the tokens at those two positions swap places, for a synthesizer head (your weights)
# and for a dot-product head of the same size.
causal = build_attention_mask(9)  # (1, 1, 9, 9): no source, every position causal
swapped = x.clone()
swapped[:, [1, 3]] = x[:, [3, 1]]
dot_layer = SelfAttention(dot).eval()
dot_layer.keep_weights = True  # the fused kernel forms no weights: asked, the layer keeps them in .last_weights


def dot_weights(z):
    dot_layer(z, causal)
    return dot_layer.last_weights


heads = {
    "synthesizer": lambda z: synthesizer_weights(z, layer.w1, layer.w2, layer.b2, 2, causal),
    "dot product": dot_weights,
}
for name, weights_of in heads.items():
    with torch.no_grad():
        before, after = weights_of(x)[0, 0, 5], weights_of(swapped)[0, 0, 5]  # (9,): query 5's row, head 0
    print(
        f"{name:<12} query 5 reads position 1 with {before[1]:.3f}, position 3 with {before[3]:.3f}; "
        f"after the swap: {after[1]:.3f} and {after[3]:.3f}"
    )

# %% [markdown] tags=["answer"]
# **Model answer.** (a) Yes, if $x_t$ says where *t* is. Query *t*'s scores are
# $\operatorname{ReLU}(x_t A + b_1) B + b_2$, a function of $x_t$ alone; with a position vector added to the
# token (learned or sinusoidal), the head can put its largest score in column *t* − 1: one learned lookup per
# position, nothing shared between positions, nothing beyond ℓ. Without a position in $x_t$ (positions
# "none"; rotary and ALiBi act on $q \cdot k$, which the synthesizer does not have, so the package refuses
# those combinations) every occurrence of a token gets the same row of scores in the first layer, and it
# cannot there (a later layer could, from what the causal mask lets a token count).
# (b) No: the score for key column *j* does not depend on $x_j$, so the head cannot find *where* a word is.
# The cell shows it: after the swap the synthesizer reads positions 1 and 3 with exactly the weights it had
# before, so it now reads the other token, while the dot-product head's weights move with the tokens. A
# synthesizer can copy a word only from a position fixed in advance. At full length this cost little on
# Tatoeba: 15 minutes on a CPU gave the synthesizer 32.63 BLEU on new sentences against 31.28 for dot-product
# attention (paired bootstrap p = 0.001; `benchmarks/RESULTS.md`, "Notebook 05's variants"), presumably
# because short sentences with an English-like word order rarely need (b).

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.1 (2 points).**
# - **2 points:** (a) yes, given a position in $x_t$ (learned or sinusoidal): one learned lookup per position, column
#   *t* − 1; without positions not in the first layer. (b) no: column *j*'s score does not depend on $x_j$, so it can
#   copy only from a position fixed in advance; cites the swap (synthesizer weights unchanged, dot-product weights
#   move).
# - **1 point:** one part right, or both answers without the reason (what $x_t$ must contain, or that the score of key
#   *j* ignores $x_j$).
# - **0 points:** says the synthesizer finds a word by its content as a dot-product head does, or that it cannot read
#   the previous token at all.
#
# *Key phrases:* "fixed in advance", "lookup per position"

# %% [markdown]
# ## 2. A Perceiver-style bottleneck, kept causal · Exercise 5.2 (2 points)
#
# Self-attention compares every position with every other, in every layer. A **bottleneck** (Jaegle et al., 2021) cross-attends from
# the ℓ inputs *down* to *m* learned latent vectors, runs the middle layers on the *m* latents only, and
# cross-attends back *up* to the ℓ positions (whose queries are the inputs themselves, so each position keeps its
# own token through the residual).
#
# **Is it causal?** The course's version lets latent *i* read inputs ≤ *i* and position *t* read latents ≤ *t*.
# That is causal: everything latent *i* holds comes from inputs ≤ *i* ≤ *t*. But no latent reads past input
# *m − 1*: with ℓ = 96 and m = 16, 80 of 96 positions never reach the middle layers, and a target word late in a
# sentence is invisible to every later position.
#
# **One rule for every mask.** Give each vector a *horizon*, the last input position it may have read: position
# *t* has horizon *t*; latent *i* gets horizon ⌊*i*·ℓ/*m*⌋, spread over the whole block. A vector with horizon
# *h* may have read the inputs at positions ≤ *h*, and, like every position, the whole French source (the first
# *P* positions of its sequence, `<sep>` included; *P* differs from sentence to sentence). The rule: **a query
# may read a key when everything the key may have read is visible to the query.**
#
# Your task has two parts; the text gives neither the comparison nor the masks, so work them out on paper first.
#
# 1. `may_read`: turn the rule into a comparison of the two horizons and *P* (write both sets of inputs down;
#    the rule is an inclusion between them, and it holds in two cases).
# 2. `bottleneck_masks`: the bottleneck's three masks for a block of ℓ positions and *m* latents, built from
#    the horizons with your rule: **down** (the latents read the inputs), **middle** (latents read latents) and
#    **up** (the positions read the latents); each mask is (queries, keys).
#
# The cell checks that with positions alone your rule gives notebook 02's prefix mask, and that your three masks
# are the ones the model uses (for *m* dividing ℓ and not).


# %%
def may_read(q_horizon, k_horizon, prefix_len):
    """q_horizon (Tq,), k_horizon (Tk,), prefix_len (B,): P of each sequence -> (B, 1, Tq, Tk) bool, True where
    the query (its horizon) may read the key (its horizon) under the rule above."""
    # BEGIN SOLUTION
    ok = k_horizon[None, None, :] <= q_horizon[None, :, None]  # (1, Tq, Tk)
    source_only = k_horizon[None, None, :] < prefix_len[:, None, None]  # (B, 1, Tk): the key read only French
    return (ok | source_only)[:, None]
    # END SOLUTION


def bottleneck_masks(m, ell, prefix_len):
    """m latents over a block of ell positions, prefix_len (B,) -> {"down": (B, 1, m, ell), "middle": (B, 1, m, m),
    "up": (B, 1, ell, m)} bool, each mask (queries, keys), built with may_read."""
    # BEGIN SOLUTION
    latents = torch.arange(m) * ell // m  # latent i: horizon floor(i * ell / m)
    positions = torch.arange(ell)
    return {
        "down": may_read(latents, positions, prefix_len),
        "middle": may_read(latents, latents, prefix_len),
        "up": may_read(positions, latents, prefix_len),
    }
    # END SOLUTION


# %% tags=["check"]
L_BLOCK, M_LATENTS = 96, 16
ours = variants.latent_horizons(M_LATENTS, L_BLOCK)
print(f"horizons, spread: {ours.tolist()}")


def bottleneck_cases(seed):
    """(m, ℓ, P per sequence): the saved block, m dividing ℓ and not, and one block drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    m, ell = int(torch.randint(2, 9, (1,), generator=g)), int(torch.randint(9, 40, (1,), generator=g))
    saved = runtime.reference_outputs("05_bottleneck_masks.json")["prefix_len"]
    cases = [(4, 12, saved), (16, 96, [1, 32, 95]), (5, 12, [1, 4, 11]), (3, 10, [1, 3, 9])]
    return cases + [(m, ell, torch.randint(1, ell, (3,), generator=g).tolist())]


def probe_bottleneck(may_read_fn, masks_fn, seed=2):
    """Runs your functions: may_read on positions alone, and the three masks of each block."""
    plens, pos = torch.tensor([1, 3, 6]), torch.arange(6)
    return {
        "positions": may_read_fn(pos, pos, plens),
        "blocks": [masks_fn(m, ell, torch.tensor(plen)) for m, ell, plen in bottleneck_cases(seed)],
    }


def verify_bottleneck(values, seed=2):
    """With positions alone, notebook 02's prefix mask; then each block's masks against the model's own."""
    assert torch.equal(values["positions"], build_attention_mask(6, torch.tensor([1, 3, 6]))), (
        "positions: notebook 02's mask"
    )
    saved = runtime.reference_outputs("05_bottleneck_masks.json")
    assert len(values["blocks"]) == len(bottleneck_cases(seed)), f"expected {len(bottleneck_cases(seed))} blocks"
    for k, ((m, ell, plen), mine) in enumerate(zip(bottleneck_cases(seed), values["blocks"])):
        assert isinstance(mine, dict) and set(mine) == {"down", "middle", "up"}, "return a dict: 'down', 'middle', 'up'"
        plen = torch.tensor(plen)
        model_masks = variants.latent_masks(variants.latent_horizons(m, ell), ell, plen)  # what the model uses
        for name in ("down", "middle", "up"):
            want = torch.tensor(saved[name], dtype=torch.bool) if k == 0 else model_masks[name]
            got = mine[name]
            assert got.shape == want.shape, f"{name}: shape {tuple(got.shape)}, expected (B, 1, queries, keys) = {tuple(want.shape)}"  # fmt: skip
            assert torch.equal(got, want), f"{name} (m = {m}, ℓ = {ell}, P = {plen.tolist()}): not the model's mask"


verify_bottleneck(probe_bottleneck(may_read, bottleneck_masks))

# %% [markdown]
# ### The price of causality

# %% [markdown] tags=["question"]
# **Question 5.2 (2 points).** Position *t* reads the English written so far only through the latents it may read
# (horizon ≤ *t*), and its own token through the residual. With ℓ = 96 and *m* = 16, how many of the most
# recent inputs up to *t*, at worst, reach position *t* through no latent? Derive it in ℓ and *m*, count it
# from the horizons, and say what you expect it to do to the bottleneck's translations.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer: for each position t, the last input it reads through a latent (the
# largest horizon <= t) and how far behind t it is. A working example for one position:
t = 40
print(f"position {t}: the last input it reads through a latent is {int(ours[ours <= t].max())}")

# %% [markdown] tags=["answer"]
# **Model answer.** The horizons are the multiples of ℓ/*m* = 6 (0, 6, …, 90). Position *t* = 6*k* + *r*
# reads latents up to horizon 6*k*, so the inputs 6*k* + 1, …, *t* reach it through no latent: *r* of them, at
# worst ℓ/m − 1 = **5** (at *t* = 6*k* + 5; ⌈ℓ/*m*⌉ − 1 when *m* does not divide ℓ). The last of them is *t*
# itself, carried by the residual; the four before it are not read at all. In code,
# `max(t - int(ours[ours <= t].max()) for t in range(96))` gives 5. A translator that cannot see the last
# words it wrote repeats or drops words, so expect the bottleneck's BLEU to show this more than the compression
# of the past into *m* vectors. Measured (`benchmarks/RESULTS.md`, "Notebook 05's variants", 15 CPU minutes on
# Tatoeba): the 16-latent bottleneck lost 9.6 BLEU on new sentences (21.65 against 31.28, p = 0.001), and
# its validation loss stayed at 1.430 against 0.990.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.2 (2 points).**
# - **2 points:** horizons are the multiples of ℓ/m = 6; at worst ℓ/m − 1 = 5 recent inputs reach *t* through no
#   latent (the newest is *t* itself, by the residual, so the four before it are not read at all); counted from the
#   horizons; expects repeated or dropped words, a BLEU loss.
# - **1 point:** the right count without the derivation in ℓ and *m* (or the derivation with an off-by-one), or no
#   expectation for the translations.
# - **0 points:** says every input reaches *t* through some latent, or counts the 80 inputs past *m* − 1 (the course's
#   version, not the spread horizons).
#
# *Key phrases:* "ℓ/m − 1", "not read at all"

# %% [markdown]
# ### The leakage tests, live
#
# For each variant: change a *target* token and check that no earlier prediction moves (causality); change a
# *source* token and check that earlier source positions do see it (the prefix is bidirectional); fill the
# padding with random tokens and check that no real position moves.

# %%
VARIANTS = {
    "vanilla (rotary)": {"positional": "rotary"},
    "learned positions": {"positional": "learned"},
    "synthesizer": {"attention": "synthesizer"},
    "bottleneck m=4": {"bottleneck_dim": 4},
    "alibi": {"positional": "alibi"},
    "no positions": {"positional": "none"},
}


def leakage_report(changes: dict) -> dict:
    torch.manual_seed(1)
    model = build_model(ModelConfig(vocab_size=30, max_len=24, n_layer=3, n_head=2, d_model=16, **changes))
    with torch.no_grad():
        for p in model.parameters():  # large random weights: any leak shows clearly
            if p.dim() > 1:
                p.normal_(0.0, 0.4)
    model.eval()
    x = torch.randint(5, 30, (1, 14))
    plen = torch.tensor([6])
    target, source = x.clone(), x.clone()
    target[0, 9] = (target[0, 9] + 1) % 30
    source[0, 4] = (source[0, 4] + 1) % 30
    base = model(x, plen)
    padded = torch.cat([x, torch.randint(0, 30, (1, 5))], dim=1)
    return {
        "causal": bool((model(target, plen) - base)[0, :9].abs().max() < 1e-5),
        "source seen both ways": bool((model(source, plen) - base)[0, :4].abs().amax(-1).min() > 1e-4),
        "padding-safe": bool((model(padded, plen)[0, :14] - base[0]).abs().max() < 1e-5),
    }


checks = {name: leakage_report(changes) for name, changes in VARIANTS.items()}
for name, result in checks.items():
    print(f"{name:<18}", "  ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in result.items()))
assert all(all(r.values()) for r in checks.values()), "a variant leaks the future, hides the source or reads padding"

# %% [markdown]
# ### What the bottleneck saves: derived, then measured

# %% [markdown] tags=["question"]
# **Question 5.3 (3 points).** Count the multiply-adds of one forward pass (×2 for FLOPs) with *L* layers, width *d*,
# feed-forward width *F* = 4*d*, *h* heads and sequence length ℓ: for the plain model, and for the bottleneck
# with *m* latents (down, *L* − 2 middle layers, up). How do the time and the memory of the attention weights
# kept for the backward pass grow with ℓ, for each? The cells after your answer measure both.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*


# %%
# Compute here what supports your answer: your count of the attention weights kept for the backward pass, at
# two lengths, and how much it grows when ℓ doubles (a power law ℓ^p grows by 2^p). Write the count for the
# plain model (m is None) and for the bottleneck with m latents; each line prints once you have filled it in.
def weights_kept(ell, n_layer=4, n_head=4, m=None):
    return None  # ✏️ your count as a function of ell (and of m when m is given)


for m in (None, 16):
    counts = [weights_kept(ell, m=m) for ell in (256, 512)]
    if None not in counts:
        name = "plain" if m is None else f"bottleneck m={m}"
        print(f"{name}: ℓ = 256 {counts[0]:,}, ℓ = 512 {counts[1]:,}, ×{counts[1] / counts[0]:.2f} when ℓ doubles")

# %% [markdown] tags=["answer"]
# **Model answer.**
#
# - **Plain model**, per layer: projections $4\ell d^2$, scores and mixing $2\ell^2 d$, feed-forward $2\ell d F$.
#   Time grows as $\ell^2$ once ℓ is large against *d*; the attention weights kept for the backward pass are
#   $L\,h\,\ell^2$ numbers, so memory grows as $\ell^2$ too.
# - **Bottleneck**: down and up cost $O(\ell d^2 + \ell m d + \ell d F)$; the $L-2$ middle layers cost
#   $4md^2 + 2m^2d + 2mdF$ each, *independent of ℓ*. Time and memory grow as ℓ: the attention weights are
#   $h\,(2m\ell + (L-2)m^2)$ numbers.
#
# Doubling ℓ multiplies the plain model's attention weights by 2² = 4 and the bottleneck's by about 2 (its
# $(L-2)m^2$ term does not grow): in the cell, `return n_head * (2 * m * ell + (n_layer - 2) * m * m)` when
# `m` is given. The other activations (about $\ell d$ per layer in both) grow as ℓ, so the plain model's total
# memory approaches ×4 per doubling only once ℓ is large against *d*. At Tatoeba's lengths (about 30 tokens)
# the ℓ² term is about 3 % of a layer's work, which is why the bottleneck saved no time there
# (`benchmarks/RESULTS.md`: it ran 20 % slower than the plain model).

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.3 (3 points).**
# - **3 points:** plain: $4\ell d^2 + 2\ell^2 d + 2\ell dF$ per layer, $L h \ell^2$ attention weights kept;
#   bottleneck: down and up linear in ℓ, the $L-2$ middle layers independent of ℓ, weights $h(2m\ell + (L-2)m^2)$; so
#   time and memory grow as ℓ² for the plain model against ℓ for the bottleneck (×4 against about ×2 per doubling).
# - **2 points:** both growth rates right, with a count that misses a term (the projections, the feed-forward, or the
#   middle layers' $m^2$).
# - **1 point:** the plain model's ℓ² only, or the growth rates stated without any count.
# - **0 points:** says the bottleneck removes the dependence on ℓ altogether, or that both grow alike.
#
# *Key phrases:* "ℓ² for the plain", "independent of ℓ"

# %% [markdown]
# The measurement: one training-mode forward pass at each length (median of 3), and the bytes of activations
# autograd keeps for the backward pass, the weights left out (`helpers.experiments.saved_bytes`: the same on
# every machine). The derived time is the FLOP count times one constant fitted to the plain model's longest
# point. (The FLOP count itself is exact: `tests/test_experiments.py` checks it against torch's FLOP counter.)
# The cell prints the measured growth per doubling of ℓ, from its two longest points.


# %%
LENGTHS = [64, 128, 256, 512] if QUICK else [64, 128, 256, 512, 1024]
shape = dict(vocab_size=64, max_len=max(LENGTHS), n_head=4, attention_kernel="explicit")
shape.update(dict(n_layer=4, d_model=64) if QUICK else dict(n_layer=6, d_model=256))
complexity = {
    "plain": experiments.measure_forward(ModelConfig(**shape), LENGTHS),
    "bottleneck m=16": experiments.measure_forward(ModelConfig(**shape, bottleneck_dim=16), LENGTHS),
}
sec_per_flop = complexity["plain"][-1]["seconds"] / complexity["plain"][-1]["flops"]
for name, rows in complexity.items():
    measured = {k: experiments.local_slopes(LENGTHS, [r[k] for r in rows])[-1] for k in ("seconds", "bytes")}
    print(f"{name}, measured per doubling of ℓ: time ×2^{measured['seconds']:.2f}, memory (all saved tensors) ×2^{measured['bytes']:.2f}")  # fmt: skip
if QUICK:
    print("Quick mode: a small model on a shared CPU, so the times include fixed overheads and move from run to run; "
          "the bytes are exact.")  # fmt: skip
plain_mem = experiments.local_slopes(LENGTHS, [r["bytes"] for r in complexity["plain"]])[-1]
neck_mem = experiments.local_slopes(LENGTHS, [r["bytes"] for r in complexity["bottleneck m=16"]])[-1]


# %% tags=["answer"]
# The solved notebook's verdict, computed from the measured and derived growth (the student copy prints only the
# measured growth above).
def growth_verdict(name: str, what: str, measured: float, derived: float, tolerance: float = 0.3) -> str:
    """One sentence: the measured growth per doubling of ℓ against the derived one, computed from the two."""
    gap = measured - derived
    verdict = (
        "close to the derivation"
        if abs(gap) <= tolerance
        else f"{'faster' if gap > 0 else 'slower'} than derived by 2^{abs(gap):.2f} per doubling"
    )
    return f"{name}, {what}: ×2^{measured:.2f} per doubling of ℓ (derived ×2^{derived:.2f}): {verdict}."


for name, rows in complexity.items():
    slopes = {
        k: experiments.local_slopes(LENGTHS, [r[k] for r in rows])[-1]
        for k in ("seconds", "flops", "bytes", "attention_bytes")
    }
    print(growth_verdict(name, "time", slopes["seconds"], slopes["flops"]))
    print(growth_verdict(name, "memory (measured: all saved tensors; derived: the attention weights)", slopes["bytes"], slopes["attention_bytes"]))  # fmt: skip
assert plain_mem > 1.4 and neck_mem < 1.25, (
    f"measured memory growth per doubling of ℓ out of range: plain 2^{plain_mem:.2f}, bottleneck 2^{neck_mem:.2f}"
)

# %% [markdown]
# **Does the measured growth follow the derivation?** On log-log axes a power law is a straight line whose
# slope is the power; the grey lines have slopes 1 and 2.

# %%
fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
colours = {"plain": "tab:blue", "bottleneck m=16": "tab:orange"}
for name, rows in complexity.items():
    c = colours[name]
    ax_t.loglog(LENGTHS, [r["seconds"] * 1e3 for r in rows], "o", color=c, label=f"{name}, measured")
    ax_t.loglog(LENGTHS, [r["flops"] * sec_per_flop * 1e3 for r in rows], "--", color=c, label=f"{name}, derived")
    ax_m.loglog(LENGTHS, [r["bytes"] / 2**20 for r in rows], "o", color=c, label=f"{name}, measured (all saved)")
    ax_m.loglog(
        LENGTHS, [r["attention_bytes"] / 2**20 for r in rows], "--", color=c, label=f"{name}, derived (attention)"
    )
for ax, what in ((ax_t, "milliseconds per forward pass"), (ax_m, "MiB kept for the backward pass")):
    x0, x1 = LENGTHS[0], LENGTHS[-1]
    for power, style in ((1, ":"), (2, "-.")):  # reference slopes through the plain model's first point
        y0 = ax.get_lines()[0].get_ydata()[0]
        ax.loglog([x0, x1], [y0, y0 * (x1 / x0) ** power], style, color="grey", lw=1, label=f"slope {power}")
    ax.set_xlabel("sequence length ℓ (tokens)")
    ax.set_ylabel(what)
    ax.legend(fontsize=7)
ax_t.set_title("Time: derived FLOPs × one fitted constant")
ax_m.set_title("Memory: attention weights derived, all saved tensors measured")
fig.suptitle(
    f"One forward pass, {shape['n_layer']} layers, width {shape['d_model']}, on {runtime.hardware_name('cpu')}"
)
fig.tight_layout()
plotting.save_figure(
    fig,
    "05_complexity",
    question="Do the time and memory of a forward pass grow with ℓ as derived in Question 5.3, for the plain model and for the bottleneck?",
    caption=f"Measured points and derived lines against sequence length, log-log; grey lines have slopes 1 and 2. Memory growth from ℓ={LENGTHS[-2]} to {LENGTHS[-1]}: 2^{plain_mem:.2f} (plain), 2^{neck_mem:.2f} (bottleneck).",
    numbers={"memory_slope_plain": round(plain_mem, 2), "memory_slope_bottleneck": round(neck_mem, 2)},
)  # fmt: skip
plt.show()


# %% [markdown]
# ## 3. Positions inside attention
#
# Five ways to give the model order, all trained in section 6:
#
# - **rotary** (RoPE): each pair of channels of *q* and *k* turned by an angle proportional to the position
#   (notebook 02, Exercise 2.1: the plain model's choice, and the reference row of every table but section 5's);
# - **none**: nothing added;
# - **learned**: a trained vector per position, added to the token (GPT-2's choice);
# - **sinusoidal**: the fixed table of notebook 02 (Exercise 2.1), added to the token;
# - **ALiBi**: nothing added to the tokens; each head adds to its scores a bias linear in the distance
#   (Exercise 5.3).
#
# Rotary and ALiBi act inside attention, on the scores. You wrote the rotation in notebook 02; here you show why it
# works, then write ALiBi.

# %%
from helpers.nn.model import rotary  # notebook 02's rotation (Exercise 2.1), as the package runs it

qv, kv = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)


def rope_score(i: int, j: int) -> float:
    """q at position i against k at position j, both turned by notebook 02's rotation."""
    return float(rotary(qv, torch.tensor([i])) @ rotary(kv, torch.tensor([j])).transpose(-2, -1))


print("q·k after rotation, by positions (i, j):")
for i, j in ((5, 2), (25, 22), (60, 57), (5, 3), (5, 5)):
    print(f"  ({i:>2}, {j:>2})  distance {i - j}: {rope_score(i, j):+.4f}")

# %% [markdown]
# ### Why the score is relative

# %% [markdown] tags=["question"]
# **Question 5.4 (2 points).** Show that turning *q* by its position *i* and *k* by its position *j* makes $q \cdot k$
# depend on *i* − *j* only, whatever the two vectors are. Which property of rotations does it use, and why does
# it let generation keep a cache of rotated keys?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A working example: the same distance at several places, and the
# same position pair with other vectors.
for shift in (0, 10, 100):
    print(f"(5 + {shift}, 2 + {shift}): {rope_score(5 + shift, 2 + shift):+.4f}")

# %% [markdown] tags=["answer"]
# **Model answer.** Write each pair as a 2-vector and $R(\varphi)$ for the rotation by $\varphi$. The pair
# of *q* at position *i* becomes $R(i\theta)q$, that of *k* at *j* becomes $R(j\theta)k$, and
# $$\big(R(i\theta)q\big)^\top R(j\theta)k = q^\top R(i\theta)^\top R(j\theta)\,k = q^\top R\big((j-i)\theta\big)\,k,$$
# because a rotation's transpose is its inverse, $R(\varphi)^\top = R(-\varphi)$, and rotations in a plane add
# their angles. Summed over the pairs, $q \cdot k$ depends on *i* − *j* alone (the cell: the same score at
# every shift, to rounding); rotations also keep lengths, so the scores' scale does not change with position.
# A key's rotation depends only on its own position, fixed once it is written, so a cache of rotated keys
# stays valid as generation moves on: each new query is rotated by its own position and meets the old keys
# at the right relative angles.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.4 (2 points).**
# - **2 points:** $(R(i\theta)q)^\top R(j\theta)k = q^\top R((j-i)\theta)k$, pair by pair: a rotation's transpose is
#   its inverse and rotations in a plane add their angles; a key's rotation depends only on its own position, so
#   cached rotated keys stay valid.
# - **1 point:** the algebra without naming the property, or no reason for the cache.
# - **0 points:** argues from the cell's numbers alone, or says the score depends on *i* and *j* separately.
#
# *Key phrases:* "transpose is its inverse", "add their angles"

# %% [markdown]
# ### Exercise 5.3 · ALiBi's distance penalty (2 points)
#
# ALiBi (Press et al., 2022) adds nothing to the tokens. Head *h* adds to the score of query *i* for key *j* a
# bias that is **linear in the signed distance** *i* − *j*, one expression for every pair: 0 for the query
# itself and $-m_h$ for the previous token. Each head has its own slope $m_h$, so some heads look far and some
# near. The paper fixes the slopes by three facts, for any number of heads $n_h$:
#
# - they form a geometric sequence, largest first;
# - its **first term equals its ratio**;
# - the **last** slope is always $2^{-8} = 1/256$ (for 8 heads: 1/2, 1/4, …, 1/256).
#
# Derive $m_h$ for any $n_h$ from these facts (for 12 heads the slopes are not powers of ½), then write the
# bias of the paper's decoder for every pair (*i*, *j*), **keys after the query included**: work out from the
# linear form what it is there (the causal mask removes those keys, but your function must not).


# %%
def alibi_causal_bias(n_head: int, T: int) -> torch.Tensor:
    """(nh, T, T): entry [h, i, j] is head h's bias for query i and key j, for every i and j (heads 0 .. nh-1,
    largest slope first)."""
    # BEGIN SOLUTION
    slopes = 2.0 ** (-8.0 * torch.arange(1, n_head + 1) / n_head)  # (nh,): m_1 .. m_nh
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): i - j, negative above the diagonal
    return -slopes[:, None, None] * distance[None].float()
    # END SOLUTION


# %% tags=["check"]
def alibi_cases(seed):
    """(n_head, T) for each check: 2 and 8 heads, the head counts the text gives no slopes for, and one drawn."""
    g = torch.Generator().manual_seed(seed)
    drawn = (int(torch.randint(1, 33, (1,), generator=g)), int(torch.randint(2, 9, (1,), generator=g)))
    return [(2, 3), (8, 4), (1, 2), (3, 2), (12, 5), drawn]


def probe_alibi(bias_fn, seed=4):
    """Runs your function for each (n_head, T)."""
    return [bias_fn(n_heads, T) for n_heads, T in alibi_cases(seed)]


def verify_alibi(biases, seed=4):
    """Zero for the query itself, a penalty for the previous token, the slopes' three facts, and one linear
    expression in i − j for every pair, keys after the query included."""
    assert len(biases) == len(alibi_cases(seed)), f"expected {len(alibi_cases(seed))} results"
    for (n_heads, T), bias in zip(alibi_cases(seed), biases):
        assert bias.shape == (n_heads, T, T), f"alibi_causal_bias({n_heads}, {T}) has shape {tuple(bias.shape)}, expected (nh, T, T)"  # fmt: skip
        assert probes.close(bias.diagonal(dim1=1, dim2=2), torch.zeros(n_heads, T)), "a query's bias for itself must be 0"  # fmt: skip
        slopes = -bias[:, 1, 0]
        assert (slopes > 0).all(), "the previous token must get a penalty −m_h, not a bonus"
        ratios = slopes[1:] / slopes[:-1]
        assert probes.close(slopes[-1], torch.tensor(2.0**-8)), f"{n_heads} heads: the last slope must be 1/256"
        assert probes.close(ratios, slopes[0].expand_as(ratios)), f"{n_heads} heads: a geometric sequence whose ratio is its first slope"  # fmt: skip
        step = bias[:, :, 1:] - bias[:, :, :-1]  # (nh, T, T - 1): the change one key further right, in every row
        same_step = probes.close(step, step[:, :1, :1].expand_as(step), atol=1e-6)
        assert same_step and probes.close(step[:, 0, 0], slopes), (
            f"{n_heads} heads, T = {T}: bias[h, i, j] must be one linear expression in i − j for every (i, j), keys "
            "after the query included"
        )
    assert probes.close(-biases[1][:, 1, 0], 2.0 ** -torch.arange(1.0, 9.0)), "eight heads: slopes 1/2, 1/4, ..., 1/256"  # fmt: skip


verify_alibi(probe_alibi(alibi_causal_bias))
eight = alibi_causal_bias(8, 4)
print("ALiBi slopes for 8 heads:", [round(s, 4) for s in (-eight[:, 1, 0]).tolist()])
print("head 0 of 8, the bias of query 3 for keys 0..3:", eight[0, 3].tolist())

# %% [markdown]
# ### What the model uses, and the paper's shortcut

# %% [markdown] tags=["question"]
# **Question 5.5 (2 points).** The ALiBi paper's code adds $m_h\,j$ (the key's position only) to the scores instead of
# $-m_h(i - j)$. Why does that give the same attention weights in a decoder? Our model's French source is read
# in both directions, and the package (`helpers.nn.variants.alibi_bias`) uses $-m_h\,|i - j|$: would the paper's
# shortcut, or your signed bias, give the same weights there?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A working example: softmax weights with your bias and with the
# paper's m_h * j, under a causal mask; try notebook 02's prefix mask (a 3-token source) and the distance |i - j|.
scores = torch.randn(2, 6, 6)  # (nh, T, T)
slopes2 = -alibi_causal_bias(2, 6)[:, 1, 0]  # (nh,)
key_only = slopes2[:, None, None] * torch.arange(6.0)[None, None, :]  # m_h * j
for mask_name, allowed in (
    ("causal", build_attention_mask(6)[0]),
    ("prefix of 3", build_attention_mask(6, torch.tensor([3]))[0]),
):
    ours_w = (scores + alibi_causal_bias(2, 6)).masked_fill(~allowed, float("-inf")).softmax(-1)
    paper_w = (scores + key_only).masked_fill(~allowed, float("-inf")).softmax(-1)
    print(f"{mask_name:<12} largest difference in the weights: {(ours_w - paper_w).abs().max():.2e}")

# %% [markdown] tags=["answer"]
# **Model answer.** $-m_h(i - j) = m_h\,j - m_h\,i$, and $m_h\,i$ is the same for every key of query *i*:
# softmax does not change when a constant is added to a whole row, so $m_h\,j$ alone gives the same weights
# (the cell: differences at rounding level under both masks). That holds under any mask, so the signed bias
# and the shortcut agree on our source too. But in the source a query also reads *later* keys ($j > i$), where
# the signed bias is $+m_h(j - i)$: a bonus that grows with the distance, pulling every source position
# toward the end of the sentence. So the package uses $-m_h|i - j|$, a penalty both ways, which is not a row
# constant plus $m_h j$, and no key-only shortcut reproduces it; on the target (keys $j \le i$) it equals your
# signed bias (`tests/notebooks/test_notebook05.py` checks that).

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.5 (2 points).**
# - **2 points:** $-m_h(i-j) = m_h j - m_h i$ and $m_h i$ is the same for every key of query *i*: a constant added to
#   a whole row leaves softmax unchanged, under any mask; in the source the signed bias is a bonus that grows with the
#   distance for later keys, so the package's $-m_h|i-j|$ is needed and no key-only shortcut gives it.
# - **1 point:** the row-constant argument for the decoder, but no (or a wrong) answer for the bidirectional source.
# - **0 points:** says the two biases give different weights in a decoder, or that $|i-j|$ equals the signed bias
#   everywhere.
#
# *Key phrases:* "whole row", "bonus that grows"


# %% [markdown]
# ## 4. Span corruption · Exercise 5.4 (6 points)
#
# Pairs are expensive (someone has to translate); single sentences are cheap. **Span corruption** (the course's
# single-span version of T5's objective, the biggest coding task of the original assignment, there on
# characters) teaches a model the languages from unpaired sentences: keep a random-length beginning of a
# sentence, cut out one span and ask the model to write the span back. In our format the corrupted sentence is
# the source and the span is the target, so pretraining exercises exactly what translation uses:
#
# `<bos> prefix <mask> suffix <sep> span <eos>`
#
# (`<mask>` is the tokenizer's `<unk>`, which byte fallback never produces from text.) Write
# `corrupt_one_span(ids, rng, max_len)`, which makes one such example from one sentence's token ids. It makes
# exactly three draws from `rng`, a NumPy `Generator` (`rng.integers(a, b, endpoint=True)` draws a whole
# number from *a* to *b*, both included), in this order:
#
# 1. **Room.** `<bos>`, `<mask>`, `<sep>` and `<eos>` take four positions; the room is `max_len − 4`. A
#    sentence of fewer than 2 tokens, or a room under 2, makes no example: return `None` and draw nothing.
# 2. **Keep a beginning.** The longest beginning allowed is 7/8 of the room (rounded down, but at least 2) and
#    no longer than the sentence. Draw its length *n* from 4 to that longest (when that longest is under 4, from
#    the longest to the longest: still one draw), and keep the first *n* tokens.
# 3. **Choose the span.** Draw its length from 1 to ⌊*n*/2⌋ (at least 1), so that it averages about a quarter
#    of *n*, and never all *n* tokens (at most *n* − 1). Then draw where it starts, among all the places it
#    fits (0 to *n* minus its length).
# 4. **Assemble** the example and count its source: every position up to and including `<sep>`, which the
#    model reads in both directions, as it reads French.
#
# The special ids are `BOS`, `MASK`, `SEP` and `EOS` below.

# %%
BOS, MASK, SEP, EOS = tok.bos_id, pretrain.MASK_ID, tok.sep_id, tok.eos_id
print(f"special ids: <bos> {BOS}, <mask> {MASK} (the <unk> id), <sep> {SEP}, <eos> {EOS}")


def corrupt_one_span(ids: list[int], rng: np.random.Generator, max_len: int) -> tuple[list[int], int] | None:
    """One pretraining example from one sentence: (input_ids, n_source), or None if none can be made.

    input_ids = [BOS, *prefix, MASK, *suffix, SEP, *span, EOS], at most max_len long, where prefix + span +
    suffix are the first n tokens of ids; n_source counts the positions up to and including SEP.
    """
    # BEGIN SOLUTION
    room = max_len - 4  # <bos>, <mask>, <sep> and <eos>
    if len(ids) < 2 or room < 2:
        return None
    longest = min(len(ids), max(2, room * 7 // 8))
    n = int(rng.integers(min(4, longest), longest, endpoint=True))  # the kept beginning
    span_len = min(int(rng.integers(1, max(1, n // 2), endpoint=True)), n - 1)  # about n / 4 on average
    start = int(rng.integers(0, n - span_len, endpoint=True))
    kept = list(ids[:n])
    prefix, span, suffix = kept[:start], kept[start : start + span_len], kept[start + span_len :]
    return [BOS, *prefix, MASK, *suffix, SEP, *span, EOS], len(prefix) + len(suffix) + 3
    # END SOLUTION


# %% tags=["check"]
# Properties first, on many cuts of sentences of 0 to 120 distinct ids (100, 101, ...): each id says where it
# came from. Then the exact outputs, saved from the package with the same draws.
def cut_lengths():
    return list(range(40)) * 20 + [60, 90, 120] * 150


def probe_cuts(cut_fn, seed=1):
    """Runs your function on every length, with max_len 16 and 96, drawing from one generator seeded by `seed`."""
    draws = np.random.default_rng(seed)
    outs = [cut_fn(list(range(100, 100 + length)), draws, max_len) for max_len in (16, 96) for length in cut_lengths()]
    return {
        "specials": [BOS, MASK, SEP, EOS],
        "cuts": [None if o is None else [[int(i) for i in o[0]], int(o[1])] for o in outs],
    }


def verify_cuts(values, seed=1):
    """Each cut's properties, then the spread of the lengths over all cuts."""
    from helpers.text.tokenizer import BOS_ID, EOS_ID, SEP_ID  # the ids of every tokenizer of the course

    bos, mask, sep, eos = BOS_ID, pretrain.MASK_ID, SEP_ID, EOS_ID
    assert values["specials"] == [bos, mask, sep, eos], "BOS, MASK, SEP and EOS must keep the ids the cell above gives"
    cases = [(max_len, length) for max_len in (16, 96) for length in cut_lengths()]
    assert len(values["cuts"]) == len(cases), f"expected {len(cases)} cuts"
    kept_lengths, span_lengths, empty_prefix, empty_suffix = [], [], 0, 0
    for (max_len, length), out in zip(cases, values["cuts"]):
        longest_allowed = max(2, (max_len - 4) * 7 // 8)
        sentence = list(range(100, 100 + length))
        if length < 2:
            assert out is None, f"a sentence of {length} token(s) makes no example: return None"
            continue
        assert out is not None, f"a sentence of {length} tokens (max_len {max_len}) makes an example, not None"
        inp, n_source = out
        assert inp[0] == bos and inp[-1] == eos, "the example starts with BOS and ends with EOS"
        assert inp.count(mask) == 1 and inp.count(sep) == 1, "exactly one MASK (where the span was) and one SEP"
        m, s = inp.index(mask), inp.index(sep)
        assert m < s, "MASK stands in the source, where the span was cut out: before SEP"
        assert n_source == s + 1, f"n_source must count BOS, prefix, MASK, suffix and SEP: {s + 1}, not {n_source}"
        prefix, suffix, span = inp[1:m], inp[m + 1 : s], inp[s + 1 : -1]
        n = len(prefix) + len(span) + len(suffix)
        assert prefix + span + suffix == sentence[:n], (
            "prefix + span + suffix must give back the beginning of the sentence: the target is the span cut out "
            "between prefix and suffix, and the kept part is the sentence's first n tokens"
        )
        assert len(inp) <= max_len, f"{len(inp)} tokens with max_len {max_len}: the room is max_len − 4"
        assert min(4, length, longest_allowed) <= n <= min(length, longest_allowed), (
            f"kept {n} tokens of {length} (max_len {max_len}): n lies between 4 and 7/8 of the room"
        )
        assert 1 <= len(span) <= max(1, n // 2) and len(span) < n, (
            f"a span of {len(span)} tokens from {n} kept: its length is drawn from 1 to n // 2 (at least 1)"
        )
        kept_lengths.append((n, length, max_len))
        span_lengths.append((len(span), n))
        empty_prefix += not prefix
        empty_suffix += not suffix
    long_spans = [(k, n) for k, n in span_lengths if n >= 8]
    ratio = sum(k for k, _ in long_spans) / sum(n for _, n in long_spans)
    assert 0.22 <= ratio <= 0.30, f"spans average {ratio:.2f} of the kept length; expected about a quarter"
    assert any(k == n // 2 for k, n in long_spans) and any(k == 1 for k, n in long_spans), "span lengths from 1 to n/2"
    assert any(n == 4 < length for n, length, _ in kept_lengths), "some cuts keep only 4 tokens of a longer sentence"
    assert any(n == length for n, length, _ in kept_lengths), "some cuts keep the whole (short) sentence"
    assert empty_prefix and empty_suffix, "the span must sometimes start the kept part and sometimes end it"


verify_cuts(probe_cuts(corrupt_one_span))
print(f"{len(cut_lengths()) * 2} cuts: every one has the properties; lengths within max_len")


# %% tags=["check"]
def probe_saved_cuts(cut_fn, seed=0):
    """Runs your function on the saved cases, each with its own seed (the saved draws: `seed` is not used)."""
    outs = []
    for case in runtime.reference_outputs("05_corrupt_span.json")["cases"]:
        rng = np.random.default_rng(case["seed"])
        outs.append([cut_fn(case["ids"], rng, case["max_len"]) for _ in case["expected"]])
    return [[None if o is None else [[int(i) for i in o[0]], int(o[1])] for o in case] for case in outs]


def verify_saved_cuts(cuts, seed=0):
    for case, got_case in zip(runtime.reference_outputs("05_corrupt_span.json")["cases"], cuts, strict=True):
        for k, (want, got) in enumerate(zip(case["expected"], got_case, strict=True)):
            got = None if got is None else {"input_ids": got[0], "n_source": got[1]}
            assert got == want, (
                f"sentence of {len(case['ids'])} tokens, max_len {case['max_len']}, seed {case['seed']}, cut {k}: "
                f"expected {want}, got {got}. Check the three draws: their order and their ranges (endpoint=True)"
            )


verify_saved_cuts(probe_saved_cuts(corrupt_one_span))
print(
    f"{sum(len(c['expected']) for c in runtime.reference_outputs('05_corrupt_span.json')['cases'])} cuts equal the saved ones"
)

# %% [markdown]
# Three examples from the training sentences, cut by your function:

# %%
cutter = np.random.default_rng(0)
for fr, _en in prepared.splits.train[:3]:
    ids, _ = corrupt_one_span(tok.encode(fr), cutter, BASE.max_len)
    m, s = ids.index(MASK), ids.index(SEP)
    print(f"{tok.decode(ids[1:m])} <mask> {tok.decode(ids[m + 1 : s])}   →   {tok.decode(ids[s + 1 : -1])!r}")
    assert tok.decode(ids[1:m] + ids[s + 1 : -1] + ids[m + 1 : s]).replace(" ", "") in fr.replace(" ", "")

# %% [markdown]
# The training runs of section 7 cut their examples with the package's own version of your function, the same
# recipe drawn from Python's `random` (`tests/notebooks/test_notebook05.py` checks that the two cut the same
# examples from the same draws), afresh each epoch.

# %% [markdown]
# ## 5. The attention variants trained, at the same budget
#
# Now each variant learns to translate, with the same data, tokenizer, seed and budget. The bottleneck uses 16
# latents (4 in quick mode's shorter blocks). Neither variant can use the plain model's rotary positions (the
# synthesizer has no query-key product to turn, the latents have no positions), so both add learned positions to
# the tokens, and their reference is the plain model with learned positions: one change at a time.

# %%
M_TRAIN = 4 if QUICK else 16
for label, changes in {
    "vanilla": {},
    "learned positions": {"positional": "learned"},
    "synthesizer": {"attention": "synthesizer", "positional": "learned"},
    f"bottleneck m={M_TRAIN}": {"bottleneck_dim": M_TRAIN, "positional": "learned"},
}.items():
    run_row(label, **changes)
VARIANT_LABELS = ["learned positions", "synthesizer", f"bottleneck m={M_TRAIN}"]  # the first: their reference
assert all(ROWS[k]["steps"] > 0 and math.isfinite(ROWS[k]["val_loss"]) for k in ["vanilla", *VARIANT_LABELS])

# %% tags=["answer"]
# The solved notebook's verdicts, computed from the rows (the student copy prints only the tables of rows).
SCORES = {  # key of a row: (what it is, whether higher is better)
    "bleu_new": ("BLEU on new sentences", True),
    "bleu_valid": ("validation BLEU", True),
    "val_loss": ("validation loss", False),
    "val_ppl": ("validation perplexity", False),
}


def noise_note(quick: bool = QUICK) -> str:
    """What the differences between rows of this run can and cannot say."""
    if quick:
        return (
            f"Quick mode: tiny models, {BUDGET_TEXT} each on the synthetic corpus, {EVAL_SENTENCES} test sentences and "
            "one seed, so these differences are noise, not a ranking, and there is nothing to explain yet. Telling "
            "two rows apart would take a paired bootstrap on the same sentences giving p < 0.05 (sacreBLEU's "
            "--paired-bs) and a gap larger than the spread over a few seeds; this notebook computes neither."
        )
    return (
        f"One seed each, {EVAL_SENTENCES} sentences per score: check a gap with a paired bootstrap on the same "
        "sentences, and against a second seed, before explaining it."
    )


def side(a: float, b: float, more: str = "higher", less: str = "lower") -> str:
    """'higher than', 'lower than' or 'level with': a against b."""
    return "level with" if abs(a - b) < 0.005 else (f"{more} than" if a > b else f"{less} than")


def compare_rows(
    rows: dict, labels: list[str], reference: str = "vanilla", key: str = "bleu_new", quick: bool = QUICK
) -> str:
    """One sentence: each row's score against the reference row's, the best row, and what the gaps can say."""
    what, higher_is_better = SCORES[key]
    ref = rows[reference][key]
    parts = [f"{k} {rows[k][key]:.2f}, {side(rows[k][key], ref)} {reference}" for k in labels]
    best = (max if higher_is_better else min)([reference, *labels], key=lambda k: rows[k][key])
    return (
        f"{what.capitalize()} ({'higher' if higher_is_better else 'lower'} is better; {reference} {ref:.2f}): "
        + "; ".join(parts)
        + f". Best in this run: {best}. "
        + noise_note(quick)
    )


print(compare_rows(ROWS, VARIANT_LABELS[1:], reference=VARIANT_LABELS[0], key="bleu_new"))


# %%
def loss_curves(labels: list[str], ax, title: str) -> None:
    for label in labels:
        points = [h for h in ROWS[label]["history"] if "val_loss" in h]
        ax.plot([h["step"] for h in points], [h["val_loss"] for h in points], "o-", label=label)
    ax.set_xlabel("training step (translation)")
    ax.set_ylabel("validation loss")
    ax.set_title(title)
    ax.legend(fontsize=8)


fig, ax = plt.subplots(figsize=(7, 4))
loss_curves(VARIANT_LABELS, ax, f"Attention variants, {BUDGET_TEXT} each ({PRESET} preset)")
plotting.save_figure(
    fig,
    "05_variant_curves",
    question="At the same budget, how do synthesizer attention and a latent bottleneck compare with dot-product attention?",
    caption="Validation loss during training for each attention variant; same data, tokenizer, seed and budget. "
    + "; ".join(f"{k}: BLEU new {ROWS[k]['bleu_new']:.1f}" for k in VARIANT_LABELS)
    + (". Quick mode: tiny models, one short run and one seed each." if QUICK else "."),
    numbers={k: ROWS[k]["bleu_new"] for k in VARIANT_LABELS},
)
plt.show()

# %% [markdown] tags=["question"]
# **Question 5.6 (1 point).** At the same budget, what does each attention variant cost or gain against dot-product
# attention (both with learned positions), in validation loss and in BLEU? Is the difference larger than what this run can resolve? Relate
# it to what you derived in Questions 5.1 and 5.2.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer: each variant's row, with the reference row (learned positions).
print(experiments.format_rows([ROWS[k] for k in VARIANT_LABELS]))

# %% tags=["answer"]
print(compare_rows(ROWS, VARIANT_LABELS[1:], reference=VARIANT_LABELS[0], key="val_loss"))
print(compare_rows(ROWS, VARIANT_LABELS[1:], reference=VARIANT_LABELS[0], key="bleu_valid"))

# %% [markdown] tags=["answer"]
# **Model answer.** In quick mode the rows differ by noise: nothing can be concluded from them, and the answer
# should say so rather than explain the order. At full length (`benchmarks/RESULTS.md`, "Notebook 05's
# variants": 15 CPU minutes each on Tatoeba, one seed, 4 layers of width 192) the synthesizer did not lose:
# 32.63 BLEU on new sentences against 31.28 (paired bootstrap p = 0.001), validation loss 0.982 against
# 0.990, with 3 % fewer parameters; short sentences in an English-like order rarely need content-based lookup
# (Question 5.1 (b)). The 16-latent bottleneck lost 9.6 BLEU (21.65, p = 0.001; validation loss 1.430) and
# ran 20 % slower: at about 30 tokens there is almost no ℓ² to save (Question 5.3), and each position reads
# its last few words through no latent (Question 5.2). The 3-minute rows of this notebook's full mode have not
# been recorded in `benchmarks/RESULTS.md`.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.6 (1 point).**
# - **1 point:** reads loss and BLEU of both variants against their reference (the plain model with learned
#   positions) *from the student's own run*, with its numbers, whatever they are; says whether the gaps are larger
#   than the run can resolve (in quick mode, or with a few hundred sentences and no interval, they are not, and the
#   variants cannot be ranked); and links each variant
#   to what the student derived: the synthesizer to what it cannot look up by content (5.1), the bottleneck to what
#   its few latents must carry (5.2). Any valid link earns it; examples, not the only answers: "the synthesizer
#   cannot copy a moved name", "the latents are a narrow pipe for long sentences".
# - **0.5 points:** this run's numbers read right, but an order the run cannot resolve stated as a finding, or no
#   link to 5.1–5.2.
# - **0 points:** no numbers from this run, or numbers from elsewhere (the course's own runs) in place of them.
#
# *For the grader:* the course's own full-length runs (`benchmarks/RESULTS.md`: the synthesizer did not lose,
# 32.63 against 31.28 BLEU; the bottleneck lost 9.6) are a reference for reading a full-mode answer, not a
# requirement: no student run reproduces them exactly.
#
# *Key phrases:* "content-based lookup", "32.63"

# %% [markdown]
# ## 6. Positions and embeddings, trained
#
# The same budget for each position scheme of section 3 (rotary is the vanilla row, learned the reference row of
# section 5):

# %%
POSITION_LABELS = ["vanilla", "learned positions"]
for kind in ("none", "sinusoidal", "alibi"):
    run_row(f"positions {kind}", positional=kind)
    POSITION_LABELS.append(f"positions {kind}")

# %% [markdown]
# ### Token embeddings from a pretrained model
#
# Our token embeddings start random. A pretrained language model has already placed tens of thousands of
# pieces of text where similar ones lie close together. `helpers.hf.embedding_transfer.transfer_embeddings`
# writes each of our pieces as text (the "▁" of sentencepiece is a leading space), cuts it with the other model's tokenizer,
# averages those pieces' vectors, and projects the result from the other model's width (576 for SmolLM2) to
# ours with PCA, scaled to our initialisation. Special and byte pieces keep their random start. Full mode takes
# SmolLM2-135M, pretrained mostly on English; quick mode a tiny **random** stand-in, whose row only shows that
# the code runs. The same budget as every other row.

# %%
if QUICK:
    EMBEDDINGS_FROM = str(
        tiny.tiny_causal_lm(prepared.splits.train[:2000], Path(tempfile.mkdtemp(prefix="05_lm-")), seed=SEED)
    )
else:
    EMBEDDINGS_FROM = loading.DEFAULT_CAUSAL  # from the hub on Colab; a local folder or .gguf file works too
row = run_row("pretrained embeddings", init_embeddings=EMBEDDINGS_FROM)
print(row["embeddings"])
POSITION_LABELS.append("pretrained embeddings")

# %% [markdown]
# **Which position scheme, and which start for the token embeddings, learns best in the same budget?**

# %%
names = [
    {"vanilla": "rotary", "learned positions": "learned", "pretrained embeddings": "rotary +\npretrained emb."}.get(
        k, k.split(" ", 1)[-1]
    )
    for k in POSITION_LABELS
]
fig, (ax_b, ax_p) = plt.subplots(1, 2, figsize=(10, 3.8))
ax_b.bar(names, [ROWS[k]["bleu_new"] for k in POSITION_LABELS], color="tab:green")
ax_b.set_ylabel("BLEU, new sentences (greedy)")
ax_b.set_title("Translation quality")
ax_p.bar(names, [ROWS[k]["val_ppl"] for k in POSITION_LABELS], color="tab:purple")
ax_p.set_ylabel("validation perplexity (lower is better)")
ax_p.set_title("Validation perplexity")
fig.suptitle(f"Position schemes and embedding starts, {BUDGET_TEXT} each ({PRESET} preset)")
fig.tight_layout()
plotting.save_figure(
    fig,
    "05_positions",
    question="Which way of giving the model word order, and which start for its token embeddings, learns best within the same budget?",
    caption="BLEU on the first new-sentence pairs and validation perplexity for each position scheme; rotary is the vanilla model; the last bar starts its token embeddings from a pretrained LM's"
    + (
        " (quick mode: a tiny random stand-in; one short run and one seed each)." if QUICK else f" ({EMBEDDINGS_FROM})."
    ),
    numbers={n: ROWS[k]["bleu_new"] for n, k in zip(names, POSITION_LABELS)},
)
plt.show()

# %% [markdown] tags=["question"]
# **Question 5.7 (1 point).** Which way of giving the model word order, and which start for the token embeddings, learns
# best within the same budget, on BLEU and on validation perplexity? Does "none" do as badly as a model blind
# to the order of the French should? What would you need to trust the ranking?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer: each row of this section.
print(experiments.format_rows([ROWS[k] for k in POSITION_LABELS]))

# %% tags=["answer"]
print(compare_rows(ROWS, POSITION_LABELS[1:], key="bleu_new"))
print(compare_rows(ROWS, POSITION_LABELS[1:], key="val_ppl"))

# %% [markdown] tags=["answer"]
# **Model answer.** In quick mode the bars differ by noise, and the pretrained-embedding row starts from a
# random stand-in, so it cannot help; the answer is that this run cannot rank them. At full length
# (`benchmarks/RESULTS.md`, 15 CPU minutes on Tatoeba) rotary against learned positions took three seeds to
# resolve: one run each scored 31.82 against 31.28 BLEU on new sentences (paired bootstrap p = 0.06, not resolved);
# three seeds each on the development half of the newer sentences gave 30.88 against 29.80 (each seed above its
# learned twin, p < 0.001), which is why notebook 02's model uses rotary positions. The sinusoidal table tied learned
# positions at 2,000 fixed steps (two seeds, within 0.05 BLEU). "None", ALiBi and the pretrained embeddings were not
# run at full length. A model with no positions still orders the English through the causal mask but sees the
# French as a bag of words, so a clear loss for "none" is what to expect; to trust any ranking you need the
# paired bootstrap on the same sentences and a second seed.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.7 (1 point).**
# - **1 point:** ranks with the numbers on BLEU and perplexity, says what this run can resolve (quick mode: nothing;
#   the pretrained row is a random stand-in); 'none' sees the French as a bag of words, so it should lose clearly;
#   trust needs a paired bootstrap and a second seed.
# - **0.5 points:** the ranking without saying what it would take to trust it, or without the 'none' argument.
# - **0 points:** says positions do not matter because 'none' came close in a quick run.
#
# *Key phrases:* "bag of words", "second seed"

# %% [markdown]
# ## 7. Span-corruption pretraining, when pairs are scarce
#
# Each point trains for the same budget; with pretraining, 30 % of it goes to span corruption (the examples of
# Exercise 5.4) on unpaired sentences and 70 % to translation on the pairs available. The unpaired sentences are
# the French and the English of every training pair, each read on its own
# (`helpers.training.pretrain.pretrain_phase`).

# %%
n_train = len(prepared.splits.train)
PAIR_COUNTS = [300, None] if QUICK else [1000, 5000, 20000, None]
study = {}
for n in PAIR_COUNTS:
    for pre in (None, "span"):
        if n is None and pre is None:  # every pair, no pretraining: the vanilla row, already trained
            study[(n, pre)] = ROWS["vanilla"]
            continue
        label = f"{'pretrained' if pre else 'scratch'}, {'all' if n is None else f'{n:,}'} pairs"
        study[(n, pre)] = run_row(label, parallel_pairs=n, pretrain=pre)
xs = [n_train if n is None else n for n in PAIR_COUNTS]
fig, ax = plt.subplots(figsize=(7, 4))
for pre, style in ((None, "o-"), ("span", "s-")):
    ax.plot(
        xs,
        [study[(n, pre)]["bleu_new"] for n in PAIR_COUNTS],
        style,
        label="span pretraining, then translation" if pre else "translation only",
    )
ax.set_xscale("log")
ax.set_xlabel("parallel pairs available for translation")
ax.set_ylabel("BLEU, new sentences (greedy)")
ax.set_title(f"Pretraining on unpaired sentences, {BUDGET_TEXT} in total per point")
ax.legend()
plotting.save_figure(
    fig,
    "05_pretraining",
    question="At equal total compute, does span-corruption pretraining on unpaired sentences help when parallel pairs are scarce?",
    caption="BLEU on the first new-sentence pairs against the number of parallel pairs, with and without span-corruption pretraining (30 % of the budget)." + (" Quick mode: tiny models, one short run and one seed each." if QUICK else ""),
    numbers={f"{'span' if pre else 'none'}_{'all' if n is None else n}": study[(n, pre)]["bleu_new"] for (n, pre) in study},
)  # fmt: skip
plt.show()
assert all(study[(n, "span")]["pretrain_steps"] > 0 and study[(n, None)]["pretrain_steps"] == 0 for n in PAIR_COUNTS)


# %% [markdown] tags=["question"]
# **Question 5.8 (1 point).** How much does span-corruption pretraining help when pairs are scarce, at equal total
# compute? Does the gain grow as the pairs get fewer, as you would expect if pretraining teaches the languages
# that the pairs alone cannot? Which comparison in this study flatters pretraining?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer: the gain (pretrained minus scratch) at each pair count.
for n in PAIR_COUNTS:
    gain = study[(n, "span")]["bleu_new"] - study[(n, None)]["bleu_new"]
    print(f"{'all' if n is None else n:>6} pairs: gain {gain:+.2f} BLEU on new sentences")


# %% tags=["answer"]
# The solved notebook's verdict, computed from the rows (the student copy prints only the gains above).
def pretraining_verdict(study: dict, counts: list, quick: bool = QUICK) -> str:
    """One sentence per pair count: did pretraining help, hurt or change nothing, computed from the rows."""
    parts = []
    for n in counts:
        pre, scratch = study[(n, "span")]["bleu_new"], study[(n, None)]["bleu_new"]
        verdict = "changed nothing" if abs(pre - scratch) < 0.005 else ("helped" if pre > scratch else "hurt")
        pairs = "all" if n is None else f"{n:,}"
        parts.append(
            f"with {pairs} pairs span pretraining {verdict} ({pre:.2f} against {scratch:.2f} BLEU on new sentences)"
        )
    return "At equal total compute, " + "; ".join(parts) + ". " + noise_note(quick)


print(pretraining_verdict(study, PAIR_COUNTS))

# %% [markdown] tags=["answer"]
# **Model answer.** Quick mode cannot answer it: its two points differ by noise. At full length, with every
# pair (`benchmarks/RESULTS.md`, "Notebook 05's variants", 15 CPU minutes on Tatoeba), span pretraining gave
# the largest gain of all the variants: 34.57 BLEU on new sentences against 31.28 (paired bootstrap p = 0.001),
# +2.0 in-distribution, although its translation phase saw 6.1 M target tokens against 8.6 M; the gain sat where
# the plain model is weakest (sentences of 11–25 words, sentences with an unseen word). Its validation loss was
# *higher* (1.036 against 0.990): teacher-forced loss and what greedy decoding writes are different measures.
# The 1k/5k/20k-pair points have not been run at full length, so whether the gain grows as pairs get fewer is
# not yet measured. What flatters pretraining: its unpaired sentences are both sides of *all* the training
# pairs, from the same domain as the test sets, so with 1,000 pairs the model has still read the other pairs'
# French and English; real monolingual text would come from elsewhere and help less.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.8 (1 point).**
# - **1 point:** the gain per pair count with the numbers (quick mode: noise); whether it grows as pairs get fewer is
#   what the curve tests; what flatters pretraining: its unpaired sentences are both sides of all the training pairs,
#   from the same domain as the test sets, whereas real monolingual text would come from elsewhere.
# - **0.5 points:** the gains without the flattering comparison, or the comparison without numbers.
# - **0 points:** says pretraining adds compute, or gives no flattering comparison.
#
# *Key phrases:* "same domain", "monolingual text", "both sides of"

# %% [markdown]
# ## 8. A hyperparameter study, designed by you
#
# "Train for more epochs" is not a finding: every setting below gets the same budget per run. Each setting
# changes one field of the preset (or the seed, which measures how far two runs of the *same* setting land
# apart); the best row is chosen on the **validation** split, and its new-sentence score is only reported.
#
# **Your budget is `STUDY_RUNS` runs** (3 in quick mode, 6 in full mode, each run as long as every other row of
# this notebook; the vanilla row is trained already and costs nothing). The menu below lists the settings
# you may try; add one to the menu if you want another field (`helpers.experiments.STUDY_FIELDS` lists the
# fields a setting may change: not the budget itself). Then choose in the marked cell. Decide before you run:
# what do you expect each setting to do, and how will you tell a real gain from the spread between runs?

# %%
STUDY_RUNS = 3 if QUICK else 6  # runs of BUDGET_TEXT each, on top of the vanilla row
STUDY_MENU = {  # name -> the fields of the preset it changes
    "lr ×2": {"lr": BASE.lr * 2},
    "lr ×0.5": {"lr": BASE.lr * 0.5},
    "half the batch tokens": {"max_tokens": BASE.max_tokens // 2},
    "no label smoothing": {"label_smoothing": 0.0},
    "warm-up ×4": {"warmup_steps": BASE.warmup_steps * 4},
    "dropout 0.2": {"dropout": 0.2},
    "one layer fewer": {"n_layer": BASE.n_layer - 1},
    "twice the heads": {"n_head": BASE.n_head * 2},
    "vanilla, seed 1": {"seed": SEED + 1},  # the vanilla setting again, another seed: the spread between runs
}
print(f"budget: {STUDY_RUNS} runs of {BUDGET_TEXT}; the vanilla row ({BASE.lr=}, {BASE.max_tokens=}) is trained")
for name, change in STUDY_MENU.items():
    print(f"  {name!r:<26} {change}")

# %% [markdown]
# ### ✏️ Your choice: the settings to try
#
# Edit the list below: names from the menu, at least 2, at most `STUDY_RUNS`. The cell refuses a list it cannot
# run (a name not on the menu, a repeat, too few, over the budget) and says what to change; it never drops a
# setting for you. The list given is a starting point that fits quick mode's budget: in full mode you have
# three runs more.

# %%
MY_SETTINGS = ["lr ×2", "half the batch tokens", "vanilla, seed 1"]  # ✏️ edit: your settings, within the budget

SETTINGS = experiments.choose_settings(MY_SETTINGS, STUDY_MENU, budget=STUDY_RUNS)
for label, setting in SETTINGS.items():
    run_row(label, **setting)
SWEEP_LABELS = ["vanilla", *SETTINGS]
sweep_rows = [ROWS[k] for k in SWEEP_LABELS]
print(experiments.format_rows(sweep_rows))

# %% [markdown]
# **Which setting helps most within the budget, on the validation split and then on new sentences?**

# %%
fig, (ax_b, ax_p) = plt.subplots(1, 2, figsize=(11, 4))
ax_b.barh(SWEEP_LABELS, [ROWS[k]["bleu_valid"] for k in SWEEP_LABELS], color="tab:blue", label="validation (chooses)")
ax_b.barh(
    SWEEP_LABELS,
    [ROWS[k]["bleu_new"] for k in SWEEP_LABELS],
    color="none",
    edgecolor="black",
    label="new sentences (reported)",
)
ax_b.set_xlabel("BLEU (greedy)")
ax_b.legend(fontsize=8)
ax_b.set_title("BLEU")
ax_p.barh(SWEEP_LABELS, [ROWS[k]["val_ppl"] for k in SWEEP_LABELS], color="tab:purple")
ax_p.set_xlabel("validation perplexity")
ax_p.set_title("Perplexity")
fig.suptitle(f"One change at a time, {BUDGET_TEXT} each ({PRESET} preset)")
fig.tight_layout()
plotting.save_figure(
    fig,
    "05_sweep",
    question="Which single hyperparameter change helps most within the same budget?",
    caption="BLEU (validation, filled; new sentences, outlined) and validation perplexity per setting, each "
    f"trained for {BUDGET_TEXT}." + (" Quick mode: tiny models on the synthetic corpus." if QUICK else ""),
    numbers={k: ROWS[k]["bleu_valid"] for k in SWEEP_LABELS},
)
plt.show()

# %% [markdown] tags=["question"]
# **Question 5.9 (1 point).** Why is the setting chosen on the validation split and not on the new sentences?
# What happens to the score of the best of several settings on the split that chose it?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer: the rows ordered by validation BLEU, with their new-sentence BLEU.
for r in sorted(sweep_rows, key=lambda r: -r["bleu_valid"]):
    print(f"{r['label']:<24} BLEU valid {r['bleu_valid']:5.2f}   BLEU new {r['bleu_new']:5.2f}")

# %% [markdown] tags=["answer"]
# **Model answer.** The split that chooses must not be the split that reports. With several settings, the best
# of them on a given split is biased upward by chance alone: part of its lead is luck on those sentences.
# Choosing on the new sentences would make their score a tuned number rather than a measurement of what a user
# meets; chosen on validation, the new-sentence score of the winner stays an honest estimate (and usually comes
# out lower than its validation lead suggested).

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.9 (1 point).**
# - **1 point:** choose on validation, report on new sentences: the best of several settings is biased upward
#   by chance on the split that chose it, so choosing on the new sentences would make their score a tuned
#   number, not a measurement.
# - **0.5 points:** says the test set must stay unseen, without the selection bias of taking the best of several.
# - **0 points:** says either split would do, or chooses on the new sentences.
#
# *Key phrases:* "biased upward", "tuned number"

# %% [markdown]
# ### Perplexity against BLEU

# %% [markdown] tags=["question"]
# **Question 5.10 (1 point).** The validation perplexity is $e$ to the validation loss (the mean cross-entropy
# per target token under teacher forcing, without label smoothing); check it on your table. Can a setting have
# the lower perplexity and still the lower BLEU? Find such a pair of rows if there is one, and explain how it can
# happen.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer: exp(loss) against the perplexity, and each row's perplexity and BLEU
# side by side (every row of this notebook: compare them in pairs).
for k in ROWS:
    r = ROWS[k]
    print(f"{k:<24} loss {r['val_loss']:.3f}  exp(loss) {math.exp(r['val_loss']):7.2f}  perplexity {r['val_ppl']:7.2f}  BLEU valid {r['bleu_valid']:5.2f}")  # fmt: skip


# %% tags=["answer"]
# The solved notebook's list of such pairs, computed from the rows (the student copy prints only the numbers).
def order_disagreements(rows: dict, labels: list[str]) -> str:
    """The pairs of rows that validation perplexity and validation BLEU order differently, from the numbers."""
    pairs = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            lo, hi = (a, b) if rows[a]["val_ppl"] <= rows[b]["val_ppl"] else (b, a)  # lo: the lower perplexity
            if rows[lo]["val_ppl"] < rows[hi]["val_ppl"] and rows[lo]["bleu_valid"] < rows[hi]["bleu_valid"]:
                pairs.append((lo, hi))
    total = len(labels) * (len(labels) - 1) // 2
    if not pairs:
        return f"Perplexity and BLEU order all {total} pairs of rows the same way (ties aside)."
    shown = "; ".join(
        f"'{lo}' has the lower perplexity ({rows[lo]['val_ppl']} against {rows[hi]['val_ppl']}) but the lower "
        f"BLEU ({rows[lo]['bleu_valid']:.2f} against {rows[hi]['bleu_valid']:.2f}) than '{hi}'"
        for lo, hi in pairs[:3]
    )
    return f"{len(pairs)} of {total} pairs of rows are ordered differently by perplexity and BLEU: {shown}."


print(order_disagreements(ROWS, SWEEP_LABELS))

# %% [markdown] tags=["answer"]
# **Model answer.** exp(loss) equals the perplexity to rounding: perplexity is the loss on another scale, "as
# unsure as a uniform choice among that many tokens". Yes, the two can disagree. Perplexity scores the
# probability the model gives to each *reference* token, with the *correct* history fed in; BLEU scores what
# greedy decoding writes from its own history, and counts only the most likely token at each step. A model can
# spread probability more evenly (lower loss on rare references) yet pick worse top tokens, or make one early
# mistake that derails the rest of a sentence, which teacher forcing never shows. Label smoothing is the classic
# case: it raises perplexity and often improves BLEU. Measured at full length (`benchmarks/RESULTS.md`,
# "Notebook 05's variants"): span pretraining had the *higher* validation loss (1.036 against 0.990) and the
# higher BLEU (34.57 against 31.28 on new sentences, 43.40 against 41.96 on validation). So choose on the measure
# you will report: validation BLEU, not validation loss.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.10 (1 point).**
# - **1 point:** exp(loss) equals the perplexity to rounding; yes, they can disagree (a pair from the table, or the
#   measured span row: higher loss, higher BLEU); perplexity scores the reference tokens with the correct history fed
#   in, BLEU what greedy decoding writes from its own history, counting only the most likely token.
# - **0.5 points:** the check of exp(loss) and a pair, with no mechanism (or a mechanism with no pair).
# - **0 points:** says a lower perplexity always means a higher BLEU.
#
# *Key phrases:* "own history", "most likely token"

# %% [markdown]
# ### The study's paragraph, written by you

# %% [markdown] tags=["question"]
# **Question 5.11 (4 points).** Write the paragraph that reports your study, as it would stand in your report:
# which settings you tried and why; which one wins on the validation split, and by how much against the vanilla
# row, set against the spread between runs (the two seeds, if you spent a run on them; what a paired bootstrap
# would add); what the winner scored on the new sentences; and whether you expect its win to hold at full length
# (15 minutes or an hour instead of one short run), with your reason and the run that would test it.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer: each setting's gap to the vanilla row (validation, then new sentences)
# and, when both seeds of the vanilla setting ran, how far apart they landed.
ref_row = ROWS["vanilla"]
for k in SETTINGS:
    r = ROWS[k]
    print(f"{k:<24} BLEU valid {r['bleu_valid'] - ref_row['bleu_valid']:+6.2f}   BLEU new {r['bleu_new'] - ref_row['bleu_new']:+6.2f}   val loss {r['val_loss'] - ref_row['val_loss']:+.3f}  (against vanilla)")  # fmt: skip
seeds = [k for k in SETTINGS if STUDY_MENU[k] == {"seed": SEED + 1}]
if seeds:
    print(f"two seeds of the vanilla setting: BLEU valid {ref_row['bleu_valid']:.2f} and {ROWS[seeds[0]]['bleu_valid']:.2f}, "
          f"{abs(ref_row['bleu_valid'] - ROWS[seeds[0]]['bleu_valid']):.2f} apart")  # fmt: skip
else:
    print(
        "no run of the vanilla setting with another seed in your study: nothing here measures the spread between runs"
    )


# %% tags=["answer"]
# The solved notebook's paragraph, computed from the rows (the student copy prints only the numbers above).
def sweep_paragraph(rows: list[dict], budget: str, quick: bool = QUICK, reference: str = "vanilla") -> str:
    """A paragraph for the report, every comparison computed from the rows; in quick mode, no reasons invited."""
    best, ref = experiments.best_row(rows), next(r for r in rows if r["label"] == reference)
    text = f"We compared {len(rows)} settings at the same budget ({budget} each, same data, tokenizer and seed). "
    if best["label"] == reference:
        rival = experiments.best_row([r for r in rows if r["label"] != reference] or [ref])
        text += (
            f"Chosen on the validation split, no change beat '{reference}' (validation BLEU {ref['bleu_valid']:.1f}; "
            f"the best change, '{rival['label']}', {rival['bleu_valid']:.1f}). "
        )
    else:
        held = best["bleu_new"] > ref["bleu_new"]
        text += (
            f"Chosen on the validation split, the best was '{best['label']}' ({best['parameters']:,} parameters): "
            f"validation BLEU {best['bleu_valid']:.1f}, {side(best['bleu_valid'], ref['bleu_valid'])} "
            f"{ref['bleu_valid']:.1f} for '{reference}'; validation perplexity {best['val_ppl']}, "
            f"{side(best['val_ppl'], ref['val_ppl'], 'worse', 'better')} {ref['val_ppl']}. On the new-sentence test "
            f"set, never used to choose, it scored {best['bleu_new']:.1f} BLEU, {side(best['bleu_new'], ref['bleu_new'])} "
            f"{ref['bleu_new']:.1f} for '{reference}': the choice "
            + ("held on new sentences. " if held else "did not carry over to new sentences. ")
        )
    if quick:
        return text + noise_note(True) + " Give no reason for this order: rerun in full mode first."
    return (
        text
        + noise_note(False)
        + " If the gap survives that, we think it is because [your reason, and the run that would test it]."
    )


print(sweep_paragraph(sweep_rows, BUDGET_TEXT))
best = experiments.best_row(sweep_rows)
if best["label"] != "vanilla":
    print(f"\nTo try it in the {PRESET} preset: config.preset_config({PRESET!r}, **{best['changed']}); adopt it only if it "
          "also wins a full-length run on the validation split (benchmarks/RESULTS.md records such runs).")  # fmt: skip

# %% [markdown] tags=["answer"]
# **Model answer.** In quick mode: no setting can be said to win. The rows differ by less than, or about as much
# as, the two seeds of the vanilla setting, so every gap is within the spread: the paragraph reports the numbers
# and says that they rank nothing. In full mode the paragraph names the setting with the best validation BLEU
# and its gap over the vanilla row, and calls it a gain only if the gap is clearly larger than the two seeds'
# distance (and survives a paired bootstrap on the same validation sentences); it reports the winner's
# new-sentence BLEU, never used to choose. Whether it holds at full length is a separate question: a change
# that wins in a few minutes can lose at an hour (a higher learning rate, say, helps early and then stalls; a
# smaller batch takes more steps early but noisier ones), so the test is the winner and the vanilla row rerun
# at the length you will train for, with two seeds each. The sweep has not been run at full length in
# `benchmarks/RESULTS.md` ("Notebook 05's variants" lists it as not run), so there is no measured answer to
# quote yet; nothing was fed back into the `cpu` preset.

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 5.11 (4 points).**
# - **4 points:** names the settings and why; the validation winner with its gap to vanilla in BLEU, set against
#   the measured spread (the two seeds) and called a gain only if it is clearly larger, otherwise within the
#   spread (quick mode: no winner); the winner's new-sentence score, reported not used to choose; whether it
#   would hold at full length, with a reason (a change that helps early can stall later) and the run that tests it.
# - **3 points:** all of that but one part thin: no spread measured or discussed, or no test run proposed.
# - **2 points:** the winner and its gap with numbers, but no spread and no judgement of full length.
# - **1 point:** a ranking read off the table without numbers, or a reason invented for a quick-mode order.
# - **0 points:** picks the winner on the new sentences, or reports no numbers.
#
# *Key phrases:* "within the spread", "helps early"

# %% [markdown]
# ## 9. Levers from the speed records
#
# The fastest published small-model training runs (the GPT-2 speedrun, KellerJordan/modded-nanogpt, and
# nanochat's smallest model) keep a handful of changes to GPT-2's recipe (AdamW, a cosine schedule, GELU). Three of them won on our development
# set and are the recipe every preset uses (notebooks 02 and 03 teach them); each has a switch that brings the
# classic choice back, so you can measure it with `python -m helpers train ... --FLAG` as section 5 does:
#
# - **Muon** (`torch.optim.Muon`; `--optimizer adamw` for AdamW alone): the blocks' weight matrices are updated
#   by an orthogonalised momentum (a few Newton–Schulz iterations), so every direction of a matrix moves at the
#   same rate; embeddings, head, norms and biases stay with AdamW. The speedrun credits it with about 1.5× the
#   sample efficiency; on two CPU cores its extra matrix products make each step slower, yet it still comes out
#   ahead in the same minutes.
# - **Warm-up, stable, decay** (`--schedule cosine` for the cosine): the peak learning rate until the last 45 %
#   of the run, then a straight line down; the loss falls sharply again in the cool-down.
# - **ReLU²** (`--activation gelu` for GPT-2's GELU): the feed-forward's non-linearity squared after the ReLU:
#   sparse, and cheaper than GELU.
#
# Three more are switches that are off by default:
#
# - **QK-norm** (`--qk-norm 1`): queries and keys scaled to unit RMS before the dot product, so no score can grow
#   without bound at a high learning rate.
# - **Zero-initialised projections** (`--zero-init 1`): every block starts as the identity and learns what to add.
# - **An untied head** (`--tie-weights 0`): the output layer gets a matrix of its own instead of the token
#   embeddings.
#
# Three more were tried the same way and are gone; their code last existed in commit a224218 of the course's
# repository, where the benchmark runs that measured them can be repeated:
#
# - **Subword regularisation** drew new segmentations of the training sentences each epoch, so that the model saw
#   words in pieces as it will see words it never met; it lost on the development set, and its code was deleted.
# - **A moving average of the weights** translated with the average of the last few hundred steps' weights, to
#   smooth the noise of single late steps; it lost or tied on the development set, and its code was deleted.
# - **Joined pairs** added training examples made of two pairs joined, so that long sources, rare in Tatoeba, were
#   not rare in training; it lost overall on the development set, and its code was deleted.
#
# Each one was measured with two seeds on the newer-sentence development set (the course's benchmark runs): Muon,
# warm-up-stable-decay and ReLU² won there, QK-norm, zero-initialised projections and the untied head lost or tied
# at our budget.
# The cell below only shows what each model switch changes in a tiny model: its parameter count and how far its
# first output moves from the default model's.

# %%
levers = {"default": {}, "QK-norm": {"qk_norm": True}, "GELU": {"activation": "gelu"},
          "zero-init": {"zero_init": True}, "untied head": {"tie_weights": False}}  # fmt: skip
ids = torch.randint(4, 200, (2, 16))
first = {}
for name, switch in levers.items():
    torch.manual_seed(0)  # the same starting weights wherever the switch leaves them alone
    lever_model = build_model(ModelConfig(vocab_size=200, max_len=32, n_layer=2, n_head=2, d_model=32, **switch))
    first[name] = lever_model(ids).detach()
    moved = (first[name] - first["default"]).abs().max()
    print(f"{name:>12}: {num_parameters(lever_model.config):>7,} parameters, logits moved by {moved:.2e}")
assert num_parameters(ModelConfig(vocab_size=200, max_len=32, n_layer=2, n_head=2, d_model=32, tie_weights=False)) == (
    num_parameters(ModelConfig(vocab_size=200, max_len=32, n_layer=2, n_head=2, d_model=32)) + 200 * 32
), "an untied head adds one vocabulary x width matrix, nothing else"
assert all((first[k] - first["default"]).abs().max() > 0 for k in levers if k != "default"), (
    "every switch changes the model"
)
from helpers.training.optim import make_optimizer  # noqa: E402

muon = make_optimizer(lever_model, config.preset_config("tiny"))  # the default optimizer: Muon beside AdamW
print(f"Muon takes {sum(len(g['params']) for g in muon.optimizers[0].param_groups)} matrices of the blocks; AdamW "
      f"{sum(len(g['params']) for g in muon.optimizers[1].param_groups)} tensors (embeddings, head, norms, biases).")  # fmt: skip

# %% [markdown]
# ## Every row, saved
#
# Every row above goes to `reports/metrics/05_variants.json` with its settings, budget, steps, validation loss
# and perplexity, and both BLEU scores, with the test set each one names.

# %%
record = {
    "notebook": "05_research_variants",
    "quick": QUICK,
    "preset": PRESET,
    "budget": BUDGET,
    "hardware": runtime.hardware_name(DEVICE),
    "data": {"source": DATA, "limit": DATA_LIMIT, "seed": SEED, "pairs": prepared.info["pairs"]},
    "scores": {
        "bleu_valid": f"greedy BLEU on the first {EVAL_SENTENCES} validation pairs (used to choose)",
        "bleu_new": f"greedy BLEU on the first {EVAL_SENTENCES} new-sentence test pairs (reported, never used to choose)",
    },
    "leakage_checks": checks,
    "complexity": complexity,
    "rows": experiments.table_rows(list(ROWS.values())),
}
path = evaluate.write_json(record, runtime.metrics_dir() / "05_variants.json")
print(f"wrote {path}: {len(record['rows'])} rows")
assert json.loads(path.read_text())["rows"][0]["label"] == "vanilla"

# %% [markdown]
# ## What to try next
#
# - **Other pretrained vectors**: `init_embeddings` takes any causal LM (a hub name, a folder, or the SmolLM2 GGUF
#   file of notebook 04). Does a multilingual model's embedding table help the French side more?
# - **More latents or fewer**: how small can *m* get before BLEU drops, and how much faster is training at ℓ = 96?
# - **The synthesizer on your own sentences**: take the pairs you reasoned about in Question 5.1 and compare the
#   two attentions' weights on them with `translate --explain`.
# - **Longer budgets**: rerun the sweep's best setting for 15 minutes (`python -m helpers train --preset cpu
#   --minutes 15 ...`) and check whether the order of the table survives.

# %% [markdown]
# ## Export for your report
#
# One call gathers every figure so far (PDF and PNG), every metrics file, and a generated `index.md` with each
# figure's title, question, caption, numbers and a LaTeX snippet, into `reports/report.zip` (saved to Drive on
# Colab when it is mounted, and offered for download). From a terminal: `python -m helpers report`.

# %%
from helpers.course import report  # noqa: E402

report.export()

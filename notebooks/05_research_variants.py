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
# # 05 · Research variants: other attentions, a bottleneck, positions, pretraining, and a hyperparameter study
#
# Notebooks 02 and 03 built one Transformer and trained it to translate. This notebook changes **one thing at
# a time** and measures what the change does, with the plain model of notebook 02 as the reference row of
# every table:
#
# 1. **Synthesizer attention**: scores that come from the query alone, with no keys.
# 2. **A Perceiver-style bottleneck**: the sequence squeezed into *m* latent vectors; how to keep it causal,
#    and what it saves (time and memory derived, then measured).
# 3. **The variants trained** at the same budget.
# 4. **Positions and embeddings**: none, learned, sinusoidal, rotary, ALiBi; token embeddings started from a
#    pretrained language model's.
# 5. **Span-corruption pretraining** on unpaired sentences, then translation from 1k, 5k, 20k or all pairs.
# 6. **A hyperparameter study** (not "train longer": every setting gets the same minutes).
#
# Every variant is one switch of the same model (`helpers.model.ModelConfig`; the code is in
# `helpers/variants.py` and `helpers/pretrain.py`), and one switch of the same command:
# `python -m helpers train --attention synthesizer`, `--bottleneck-dim 16`, `--positions rotary`,
# `--pretrain span`, `--parallel-pairs 5000`. Each variant passes the tests the plain model passes: a later
# token never changes an earlier prediction, padding never changes a real position, and the French source
# is visible in both directions (`tests/test_model.py` runs the same tests on each).
#
# **How every row is scored.** Same data, tokenizer, seed and budget; only the named setting changes. Settings
# are *chosen* on the validation split (`BLEU valid`); the new-sentence test set (`BLEU new`, sentences unlike
# the training file, the score that says what a user meets) is reported beside it and never used to choose.
#
# **How to run.** On Colab with a T4, *Run all* (about 80 minutes, an estimate not yet measured on a T4: 23
# runs of 3 minutes plus scoring); say yes to Google Drive and each finished row is kept there, so a
# disconnect costs at most the row in progress. Quick mode (`python -m helpers run-notebooks --only 05`, the
# tests) runs every code path on the synthetic built-in corpus with tiny models in a few minutes on two CPU
# cores: its numbers say that the code runs and learns, not which variant is better. Measured 15-minute
# CPU runs of each variant on Tatoeba are in `benchmarks/RESULTS.md`.
#
# Figures go to `reports/figures/05_*.pdf` and `.png`, every row to `reports/metrics/05_variants.json`.

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
# Budgets. Quick mode: the tiny preset for a few dozen steps per row. Full mode: minutes per row.
import json
import math
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from helpers import config as C
from helpers import data as D
from helpers import evaluate as E
from helpers import experiments as X
from helpers import model as M
from helpers import plotting
from helpers import pretrain as P
from helpers import pretrained as PT
from helpers import sources as S
from helpers import variants as VAR

DEVICE = runtime.pick_device()
PRESET = "tiny" if QUICK else ("t4" if DEVICE.type == "cuda" else "cpu")
BUDGET = {"steps": 300} if QUICK else {"minutes": 3.0}  # the same for every row of every table
DATA_LIMIT = 6000 if QUICK else None  # pairs of the built-in corpus in quick mode; None = all of Tatoeba
EVAL_SENTENCES = 200 if QUICK else 1000  # first sentences of the validation split and of the new-sentence set
if QUICK:
    torch.set_num_threads(1)  # tiny models: a second thread only waits (see notebook 03)
DRIVE = None if QUICK else colab.mount_drive(ask=True)
BUDGET_TEXT = f"{BUDGET['steps']} steps" if "steps" in BUDGET else f"{BUDGET['minutes']:g} min"
print(f"preset {PRESET!r} on {runtime.hardware_name(DEVICE)}; {BUDGET_TEXT} per row")

# %% [markdown]
# The data and tokenizer of notebook 03, prepared in one call (`helpers.data.prepare_data`: load, clean, split
# with the new-sentence test set held out first, tokenizer on the training split only, encode, batch).

# %%
DATA = "builtin" if QUICK else str(S.find_local_tatoeba() or S.fetch_tatoeba(cache_dir=DRIVE))
BASE = C.preset_config(PRESET, seed=SEED, **BUDGET)
prepared = D.prepare_data(DATA, BASE, None, seed=SEED, limit=DATA_LIMIT, progress=False)
tok = prepared.tokenizer
print(prepared.describe())
# finished rows survive a disconnect in full mode (Drive if mounted); quick mode always recomputes
CACHE = X.ResultsCache(None if QUICK else runtime.reports_dir() / "05_rows.json")
FINGERPRINT = {"data": prepared.info, "base": BASE.to_dict()}
ROWS: dict[str, dict] = {}  # every row of every table, for 05_variants.json


def run_row(label: str, **changes) -> dict:
    """Train BASE with `changes` for the same budget and score it (helpers.experiments.run_variant)."""
    cfg = C.preset_config(PRESET, seed=SEED, **BUDGET, **changes)
    row = CACHE.run(
        label,
        {**FINGERPRINT, "changes": changes},
        lambda: X.run_variant(prepared, cfg, label=label, base=BASE, device=DEVICE, eval_sentences=EVAL_SENTENCES),
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
# **synthesizer** (Tay et al., 2021; the CS224N version) skips the comparison. Each head *i* turns $x_t$ alone
# into one score per *position* of the block:
#
# $$Y_i = \operatorname{softmax}\big(\operatorname{ReLU}(X A_i + b_1)\, B_i + b_2\big)\,(X V_i),\qquad
# A_i \in \mathbb{R}^{d \times d/h},\ B_i \in \mathbb{R}^{d/h \times \ell},\ V_i \in \mathbb{R}^{d \times d/h},$$
#
# then the usual output projection. Column *j* of the scores is "how much to read position *j*", so the
# scores for a sequence of length *T* are the first *T* columns, masked exactly as dot-product scores are
# (causal for the English, both directions within the French). It can learn "look two positions back", but
# not "look for the verb": where it looks cannot depend on what the other tokens are.
#
# Write the weights of all heads below (ReLU, then the score columns of the first *T* positions, then the
# mask, then a softmax over the keys); the cell checks them against the package's layer with the same weights.


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
torch.manual_seed(0)
small = M.ModelConfig(vocab_size=50, max_len=16, n_layer=2, n_head=2, d_model=16, attention="synthesizer")
layer = VAR.SynthesizerAttention(small).eval()
with torch.no_grad():
    layer.b2.normal_()  # b2 starts at zero; random values make a forgotten b2 show
x = torch.randn(2, 9, 16)
mask = M.build_attention_mask(9, torch.tensor([4, 6]))  # a 4- and a 6-token source
mine = synthesizer_weights(x, layer.w1, layer.w2, layer.b2, 2, mask)
_, theirs = layer(x, mask, return_weights=True)
assert torch.allclose(mine, theirs, atol=1e-6), "the notebook's synthesizer and helpers.variants disagree"
assert torch.allclose(mine.sum(-1), torch.ones(2, 2, 9)) and (mine.masked_select(~mask.expand_as(mine)) == 0).all()
# where query t looks does not depend on the other tokens: change token 2, rows 3.. keep their weights
y = x.clone()
y[:, 2] += 1.0
moved = synthesizer_weights(y, layer.w1, layer.w2, layer.b2, 2, mask)
assert torch.allclose(moved[:, :, 3:], mine[:, :, 3:]) and not torch.allclose(moved[:, :, 2], mine[:, :, 2])
dot = M.ModelConfig(**{**small.to_dict(), "attention": "dot"})
print(
    f"parameters per attention layer: dot product {VAR.num_variant_parameters(dot)['attention']:,}, "
    f"synthesizer {VAR.num_variant_parameters(small)['attention']:,} (B_i and b2 grow with the block length ℓ)"
)

# %% [markdown]
# **Generation.** A key/value cache works because an earlier position's key and value never change. The
# synthesizer has no keys, and its score columns are *absolute* positions, which the cache's left-padded
# batches would shift; so `generate` recomputes the whole sequence at each step for it (`supports_cache` is
# False), and `tests/test_model.py` checks that this gives the same tokens as decoding one sentence at a time.

# %% [markdown]
# ## 2. A Perceiver-style bottleneck, kept causal · Exercise 5.2 (2 points)
#
# Self-attention over ℓ positions costs ℓ² per layer. A **bottleneck** (Jaegle et al., 2021) cross-attends from
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
# *t* has horizon *t*; latent *i* gets horizon ⌊*i*·ℓ/*m*⌋, spread over the whole block. A query may read a key if
# everything the key has read is visible to the query: key horizon ≤ query horizon, *or* the key has read only
# the French source (which every position may see). With positions only, this is exactly notebook 02's prefix
# mask; applied to latents it keeps the bottleneck causal.
#
# **The price of causality.** Position *t* reads the English written so far only through latents whose
# horizon is ≤ *t*: the up to ℓ/*m* − 1 most recent English tokens after the last horizon are invisible to it
# (5 tokens with ℓ = 96 and *m* = 16). A translator that cannot see the word it just wrote will stumble; expect
# the bottleneck's BLEU to measure this more than the compression itself. Write the rule as a mask below; the cell checks it
# against notebook 02's mask and against `helpers.variants.read_mask`, which the model uses.


# %%
def may_read(q_horizon, k_horizon, prefix_len):
    """(B, 1, Tq, Tk) bool: a query may read a key iff key horizon <= query horizon or key horizon < prefix_len."""
    # BEGIN SOLUTION
    ok = k_horizon[None, None, :] <= q_horizon[None, :, None]  # (1, Tq, Tk)
    source_only = k_horizon[None, None, :] < prefix_len[:, None, None]  # (B, 1, Tk): the key read only French
    return (ok | source_only)[:, None]
    # END SOLUTION


# %% tags=["check"]
L_BLOCK, M_LATENTS = 96, 16
course = torch.arange(M_LATENTS)
ours = VAR.latent_horizons(M_LATENTS, L_BLOCK)
reach = {name: int(h.max()) + 1 for name, h in (("course", course), ("spread", ours))}
print(f"horizons, spread: {ours.tolist()}")
print(f"inputs some latent reads: course {reach['course']} of {L_BLOCK}, spread {reach['spread']} of {L_BLOCK}")
plens = torch.tensor([1, 3, 6])
pos = torch.arange(6)
assert torch.equal(may_read(pos, pos, plens), M.build_attention_mask(6, plens)), "positions: notebook 02's mask"
for q_h, k_h in ((ours, pos), (ours, ours), (pos, ours)):  # down, middle, up
    assert torch.equal(may_read(q_h, k_h, plens), VAR.read_mask(q_h, k_h, plens)), "latents: helpers.variants"

# %% [markdown]
# **The leakage tests, live.** For each variant: change a *target* token and check that no earlier prediction
# moves (causality); change a *source* token and check that earlier source positions do see it (the prefix is
# bidirectional); fill the padding with random tokens and check that no real position moves.

# %%
VARIANTS = {
    "vanilla": {},
    "synthesizer": {"attention": "synthesizer"},
    "bottleneck m=4": {"bottleneck_dim": 4},
    "rotary": {"positional": "rotary"},
    "alibi": {"positional": "alibi"},
    "no positions": {"positional": "none"},
}


def leakage_report(changes: dict) -> dict:
    torch.manual_seed(1)
    model = M.DecoderOnlyTransformer(
        M.ModelConfig(vocab_size=30, max_len=24, n_layer=3, n_head=2, d_model=16, **changes)
    )
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
    print(f"{name:<16}", "  ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in result.items()))
assert all(all(r.values()) for r in checks.values()), "a variant leaks the future, hides the source or reads padding"

# %% [markdown]
# ### What the bottleneck saves: derived, then measured
#
# Count the multiply-adds of one forward pass (×2 for FLOPs) with *L* layers, width *d*, feed-forward width
# *F* = 4*d* and sequence length ℓ:
#
# - **Plain model**, per layer: projections $4\ell d^2$, scores and mixing $2\ell^2 d$, feed-forward $2\ell d F$.
#   Time grows as $\ell^2$ once ℓ is large against *d*; the attention weights kept for the backward pass are
#   $L\,h\,\ell^2$ numbers, so memory grows as $\ell^2$ too.
# - **Bottleneck**: down and up cost $O(\ell d^2 + \ell m d + \ell d F)$; the $L-2$ middle layers cost
#   $4md^2 + 2m^2d + 2mdF$ each, *independent of ℓ*. Time and memory grow as ℓ: the attention weights are
#   $h\,(2m\ell + (L-2)m^2)$ numbers.
#
# The measurement: one training-mode forward pass at each length (median of 3), and the bytes of activations
# autograd keeps for the backward pass, the weights left out (`helpers.experiments.saved_bytes`: the same on
# every machine). The derived time is the FLOP count times one constant fitted to the plain model's longest
# point. (The FLOP count itself is exact: `tests/test_experiments.py` checks it against torch's FLOP counter.)

# %%
LENGTHS = [64, 128, 256, 512] if QUICK else [64, 128, 256, 512, 1024]
shape = dict(vocab_size=64, max_len=max(LENGTHS), n_head=4, attention_kernel="explicit")
shape.update(dict(n_layer=4, d_model=64) if QUICK else dict(n_layer=6, d_model=256))
complexity = {
    "plain": X.measure_forward(M.ModelConfig(**shape), LENGTHS),
    "bottleneck m=16": X.measure_forward(M.ModelConfig(**shape, bottleneck_dim=16), LENGTHS),
}
sec_per_flop = complexity["plain"][-1]["seconds"] / complexity["plain"][-1]["flops"]
for name, rows in complexity.items():
    t_slope = X.local_slopes(LENGTHS, [r["seconds"] for r in rows])
    m_slope = X.local_slopes(LENGTHS, [r["bytes"] for r in rows])
    f_slope = X.local_slopes(LENGTHS, [r["flops"] for r in rows])
    print(f"{name}: growth from ℓ={LENGTHS[-2]} to {LENGTHS[-1]}: time ×2^{t_slope[-1]:.2f} (derived ×2^{f_slope[-1]:.2f}), "
          f"memory ×2^{m_slope[-1]:.2f}")  # fmt: skip
plain_mem = X.local_slopes(LENGTHS, [r["bytes"] for r in complexity["plain"]])[-1]
neck_mem = X.local_slopes(LENGTHS, [r["bytes"] for r in complexity["bottleneck m=16"]])[-1]
assert plain_mem > 1.4 and neck_mem < 1.25, "memory should grow ~quadratically (plain) and ~linearly (bottleneck)"

# %% [markdown]
# **Question: does the measured growth follow the derivation?** On log-log axes a power law is a straight line
# whose slope is the power: 2 for the plain model's attention, 1 for the bottleneck.

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
    question="Does the time and memory of a forward pass grow as the derivation says, ℓ² for the plain model and ℓ for the bottleneck?",
    caption=f"Measured points and derived lines against sequence length, log-log; grey lines have slopes 1 and 2. Memory growth from ℓ={LENGTHS[-2]} to {LENGTHS[-1]}: 2^{plain_mem:.2f} (plain), 2^{neck_mem:.2f} (bottleneck).",
    numbers={"memory_slope_plain": round(plain_mem, 2), "memory_slope_bottleneck": round(neck_mem, 2)},
)  # fmt: skip
plt.show()

# %% [markdown]
# ## 3. The variants trained, at the same budget
#
# Now each variant learns to translate, with the same data, tokenizer, seed and budget. The bottleneck uses 16
# latents (4 in quick mode's shorter blocks). **Question: what does each change cost in validation loss and
# BLEU at equal training time?**

# %%
M_TRAIN = 4 if QUICK else 16
for label, changes in {
    "vanilla": {},
    "synthesizer": {"attention": "synthesizer"},
    f"bottleneck m={M_TRAIN}": {"bottleneck_dim": M_TRAIN},
}.items():
    run_row(label, **changes)
VARIANT_LABELS = ["vanilla", "synthesizer", f"bottleneck m={M_TRAIN}"]
assert all(ROWS[k]["steps"] > 0 and math.isfinite(ROWS[k]["val_loss"]) for k in VARIANT_LABELS)


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
    + "; ".join(f"{k}: BLEU new {ROWS[k]['bleu_new']:.1f}" for k in VARIANT_LABELS),
    numbers={k: ROWS[k]["bleu_new"] for k in VARIANT_LABELS},
)
plt.show()

# %% [markdown]
# ## 4. Positions
#
# Attention by itself is blind to order within the French source (it sees a set), and only the causal mask
# tells the English tokens apart. Five ways to give the model order:
#
# - **none**: nothing added (the causal mask alone leaks order: a token can count what it sees);
# - **learned**: a trained vector per position, added to the token (notebook 02's choice);
# - **sinusoidal**: the fixed clocks of notebook 01;
# - **rotary** (RoPE): each pair of channels of *q* and *k* turned by an angle proportional to the position,
#   so that $q_i \cdot k_j$ depends only on $i - j$;
# - **ALiBi**: nothing added to the tokens; each head subtracts $\text{slope}_h\,|i-j|$ from its scores.
#
# First, the property that makes rotary relative: shift both positions by the same amount and the score stays.

# %%
q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)


def rotary_score(i: int, j: int) -> float:
    return float(VAR.rotary(q, torch.tensor([i])) @ VAR.rotary(k, torch.tensor([j])).transpose(-2, -1))


print(
    f"score at (5, 2): {rotary_score(5, 2):.4f}; at (25, 22): {rotary_score(25, 22):.4f}; at (5, 3): {rotary_score(5, 3):.4f}"
)
assert abs(rotary_score(5, 2) - rotary_score(25, 22)) < 1e-4 and abs(rotary_score(5, 2) - rotary_score(5, 3)) > 1e-4
print("ALiBi slopes for 8 heads:", [round(s, 4) for s in VAR.alibi_slopes(8).tolist()])

# %% [markdown]
# The same budget for each scheme (learned is the vanilla row):

# %%
POSITION_LABELS = ["vanilla"]
for kind in ("none", "sinusoidal", "rotary", "alibi"):
    run_row(f"positions {kind}", positional=kind)
    POSITION_LABELS.append(f"positions {kind}")

# %% [markdown]
# ### Token embeddings from a pretrained model
#
# Our token embeddings start random. A pretrained language model has already placed tens of thousands of
# pieces of text where similar ones lie close together. `helpers.pretrained.transfer_embeddings` writes each of
# our pieces as text (the "▁" of sentencepiece is a leading space), cuts it with the other model's tokenizer,
# averages those pieces' vectors, and projects the result from the other model's width (576 for SmolLM2) to
# ours with PCA, scaled to our initialisation. Special and byte pieces keep their random start. Full mode takes
# SmolLM2-135M, pretrained mostly on English (expect more help on the English side than the French); quick mode
# a tiny **random** stand-in, whose row only shows that the code runs. The same budget as every other row.

# %%
if QUICK:
    EMBEDDINGS_FROM = str(
        PT.tiny_causal_lm(prepared.splits.train[:2000], Path(tempfile.mkdtemp(prefix="05_lm-")), seed=SEED)
    )
else:
    EMBEDDINGS_FROM = PT.DEFAULT_CAUSAL  # from the hub on Colab; a local folder or .gguf file works too
row = run_row("pretrained embeddings", init_embeddings=EMBEDDINGS_FROM)
print(row["embeddings"])
POSITION_LABELS.append("pretrained embeddings")

# %% [markdown]
# **Question: which position scheme, and which start for the token embeddings, learns best in the same budget?**

# %%
names = [
    {"vanilla": "learned", "pretrained embeddings": "learned +\npretrained emb."}.get(k, k.split(" ", 1)[-1])
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
    caption="BLEU on the first new-sentence pairs and validation perplexity for each position scheme; learned is the vanilla model; the last bar starts its token embeddings from a pretrained LM's"
    + (" (quick mode: a tiny random stand-in)." if QUICK else f" ({EMBEDDINGS_FROM})."),
    numbers={n: ROWS[k]["bleu_new"] for n, k in zip(names, POSITION_LABELS)},
)
plt.show()

# %% [markdown]
# ## 5. Span-corruption pretraining
#
# Pairs are expensive (someone has to translate); single sentences are cheap. **Span corruption** (the course's
# single-span version of T5's objective) teaches a model the languages from unpaired sentences: keep a
# random-length beginning of a sentence (4 tokens up to 7/8 of the block), cut out one span (a quarter of it
# on average) and ask the model to write the span back. In our format the corrupted sentence is the source and
# the span is the target, so pretraining exercises exactly what translation uses:
#
# `<bos> prefix <mask> suffix <sep> span <eos>`
#
# (`<mask>` is the tokenizer's `<unk>`, which byte fallback never produces from text.) The sentences are both
# sides of *all* the training pairs, unpaired. That flatters pretraining a little: a model given 1,000 pairs has
# still read, unpaired, the French and the English of every other pair, from the same domain. Real monolingual
# text would come from elsewhere (news, Wikipedia) and help less. Three examples, cut afresh each epoch:

# %%
import random  # noqa: E402

rng = random.Random(0)
for fr, _en in prepared.splits.train[:3]:
    ex = P.corrupt_span(tok.encode(fr), rng, BASE.max_len)
    ids = ex.input_ids
    m, s = ids.index(P.MASK_ID), ids.index(tok.sep_id)
    print(f"{tok.decode(ids[1:m])} <mask> {tok.decode(ids[m + 1 : s])}   →   {tok.decode(ids[s + 1 : -1])!r}")
    assert tok.decode(ids[1:m] + ids[s + 1 : -1] + ids[m + 1 : s]).replace(" ", "") in fr.replace(" ", "")

# %% [markdown]
# **Question: how much does pretraining help when pairs are scarce, at equal total compute?** Each point
# trains for the same budget; with pretraining, 30 % of it goes to span corruption on all the unpaired
# sentences and 70 % to translation on the pairs available.

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
    caption="BLEU on the first new-sentence pairs against the number of parallel pairs, with and without span-corruption pretraining (30 % of the budget).",
    numbers={f"{'span' if pre else 'none'}_{'all' if n is None else n}": study[(n, pre)]["bleu_new"] for (n, pre) in study},
)  # fmt: skip
plt.show()
assert all(study[(n, "span")]["pretrain_steps"] > 0 and study[(n, None)]["pretrain_steps"] == 0 for n in PAIR_COUNTS)

# %% [markdown]
# ## 6. A hyperparameter study
#
# "Train for more epochs" is not a finding: every setting below gets the same budget. Each row changes one
# field of the preset; the best row is chosen on the **validation** split, and its new-sentence score is only
# reported. `helpers.experiments.sweep` refuses fields that would change the budget itself.

# %%
SETTINGS = {"lr ×2": {"lr": BASE.lr * 2}, "half the batch tokens": {"max_tokens": BASE.max_tokens // 2}}
if not QUICK:  # quick mode runs two settings: every code path, in seconds
    SETTINGS.update(
        {
            "lr ×0.5": {"lr": BASE.lr * 0.5},
            "no label smoothing": {"label_smoothing": 0.0},
            "warm-up ×4": {"warmup_steps": BASE.warmup_steps * 4},
            "dropout 0.2": {"dropout": 0.2},
            "one layer fewer": {"n_layer": BASE.n_layer - 1},
            "twice the heads": {"n_head": BASE.n_head * 2},
        }
    )
for label, setting in SETTINGS.items():
    run_row(label, **setting)
SWEEP_LABELS = ["vanilla", *SETTINGS]
sweep_rows = [ROWS[k] for k in SWEEP_LABELS]
print(X.format_rows(sweep_rows))

# %% [markdown]
# **Question: which setting helps most within the budget, on the validation split and then on new sentences?**

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
best = X.best_row(sweep_rows)
plotting.save_figure(
    fig,
    "05_sweep",
    question="Which single hyperparameter change helps most within the same budget?",
    caption=f"BLEU (validation, filled; new sentences, outlined) and validation perplexity per setting; chosen on validation: {best['label']}.",
    numbers={k: ROWS[k]["bleu_valid"] for k in SWEEP_LABELS},
)  # fmt: skip
plt.show()

# %% [markdown]
# A paragraph for your report, filled in from the table (edit the reasons; keep the numbers):

# %%
print(X.report_paragraph(sweep_rows, BUDGET_TEXT))
if best["label"] != "vanilla":
    print(f"\nTo try it in the {PRESET} preset: C.preset_config({PRESET!r}, **{best['changed']}); adopt it only if it "
          "also wins a full-length run on the validation split (benchmarks/RESULTS.md records such runs).")  # fmt: skip

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
    "rows": X.table_rows(list(ROWS.values())),
}
path = E.write_json(record, runtime.metrics_dir() / "05_variants.json")
print(f"wrote {path}: {len(record['rows'])} rows")
assert json.loads(path.read_text())["rows"][0]["label"] == "vanilla"

# %% [markdown]
# ## What to try next
#
# - **Other pretrained vectors**: `init_embeddings` takes any causal LM (a hub name, a folder, or the SmolLM2 GGUF
#   file of notebook 04). Does a multilingual model's embedding table help the French side more?
# - **More latents or fewer**: how small can *m* get before BLEU drops, and how much faster is training at ℓ = 96?
# - **The synthesizer's weakness**: find a sentence pair where looking up a word by content matters (a name
#   moved to another position), and compare the two attentions on it.
# - **Longer budgets**: rerun the sweep's best setting for 15 minutes (`python -m helpers train --preset cpu
#   --minutes 15 ...`) and check whether the order of the table survives.

# %% [markdown]
# ## Export for your report
#
# One call gathers every figure so far (PDF and PNG), every metrics file, and a generated `index.md` with each
# figure's title, question, caption, numbers and a LaTeX snippet, into `reports/report.zip` (saved to Drive on
# Colab when it is mounted, and offered for download). From a terminal: `python -m helpers report`.

# %%
from helpers import report  # noqa: E402

report.export()

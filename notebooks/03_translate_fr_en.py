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
# # 03 · Training French→English in an hour, and scoring it honestly
#
# Notebook 02 built a decoder-only Transformer and taught it six sentences. Here the same model,
# imported from `helpers.model`, learns to translate real French sentences (the Tatoeba collection)
# on a free Colab T4 within a time budget, survives a disconnect, and ends with a score you can put in
# a report: sacreBLEU BLEU and chrF on sentences it never saw, next to the score of a baseline that
# does not translate at all.
#
# **What you will learn**
#
# - what one training example looks like (`<bos> French <sep> English <eos>`), which tokens the loss
#   sees, and why batches of similar lengths waste less compute on padding;
# - the parts of a modern training step: AdamW, warm-up then cosine decay, label smoothing, gradient
#   clipping, mixed precision (fp16 with a gradient scaler on a T4, bf16 where the GPU has it);
# - a training loop of about fifty lines that stops on a time budget, checkpoints every few minutes
#   and resumes exactly where it stopped;
# - greedy and beam-search decoding with the key/value cache, and how to report BLEU and chrF so that
#   someone else can reproduce them;
# - why a score means little without a baseline, and why test sentences must never leak into training.
#
# **How to run.** On Colab: *Runtime → Change runtime type → T4 GPU*, then *Runtime → Run all*. You
# will be asked whether to mount Google Drive: say yes, and checkpoints survive a disconnect (running
# all cells again resumes the training). The full run takes about an hour: a few minutes of data and
# tokenizer, 45 minutes of training, a few minutes of evaluation. Headless, from the repository root:
# `QUICK=1 python -m helpers run-notebooks --only 03`; quick mode trains a tiny model on the built-in
# synthetic corpus in well under three minutes on two CPU cores, through every code path. Figures go to
# `reports/figures/03_*.pdf` and `.png`, metrics to `reports/metrics/03_scratch.json`.
#
# **What to expect.** Target: BLEU ≥ 45 on the held-out Tatoeba test sentences after the T4 run; this
# is a target, not yet measured on a T4. Quick mode's numbers are on synthetic sentences and say only
# that the code learns.
#
# **The same pipeline from a terminal.** `python -m helpers train --data fra.txt --minutes 45 --preset t4
# --out runs/fr-en` runs the loop below (`helpers.train.train`; a test checks that it ends with exactly
# the same weights as this notebook's loop), and `python -m helpers evaluate --checkpoint runs/fr-en
# --test runs/fr-en/test.tsv` scores it.

# %% tags=["parameters"]
# Set-up and parameters. QUICK=1 (the headless runner and the tests set it) shrinks sizes and
# steps but runs every code path; on Colab the default is the full run.
import subprocess
import sys

if "google.colab" in sys.modules:  # install the course package and what Colab lacks; torch is never reinstalled
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "git+https://github.com/transformers-by-building/course"],
        check=True,
    )
from helpers import colab, runtime

QUICK = runtime.quick_mode()
SEED = 0
ACCELERATOR = colab.setup()

# %%
# Sizes. A preset (helpers.train.PRESETS) fixes the model, the vocabulary, the batch size and the schedule.
import torch

DEVICE = runtime.pick_device()
PRESET = "tiny" if QUICK else ("t4" if DEVICE.type == "cuda" else "cpu")
TRAIN_MINUTES = 2.0 if QUICK else (45.0 if DEVICE.type == "cuda" else 15.0)  # the time budget
TRAIN_STEPS = 1500 if QUICK else None  # quick mode stops after this many steps (the 2 minutes are a safety cap)
DATA_LIMIT = 6000 if QUICK else None  # pairs of the built-in corpus in quick mode; None = all of Tatoeba
BEAMS = 4
BEAM_SENTENCES = None if (QUICK or DEVICE.type == "cuda") else 2000  # beam search on a CPU: a sample of the test set
RESUME_STEPS = 40  # length of the small runs that check resuming
if PRESET == "tiny":
    # Operations this small gain nothing from a second thread, and on a busy machine two threads wait for
    # each other at every operation (we measured steps 100 times slower with two threads on two shared cores).
    torch.set_num_threads(1)
print(
    f"preset {PRESET!r} on {DEVICE}; budget {TRAIN_MINUTES:g} min" + (f" or {TRAIN_STEPS} steps" if TRAIN_STEPS else "")
)

# %%
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from helpers import checkpoint as ckpt
from helpers import config as C
from helpers import corpus
from helpers import data as D
from helpers import evaluate as E
from helpers import sources as S
from helpers import tokens as TK
from helpers import train as T
from helpers.model import DecoderOnlyTransformer, num_parameters
from helpers.plotting import in_live_kernel, save_figure

cfg = C.preset_config(PRESET, minutes=TRAIN_MINUTES, steps=TRAIN_STEPS, seed=SEED)
runtime.set_seed(SEED)

# %% [markdown]
# ## Where the checkpoints go
#
# A free Colab runtime can disconnect at any time, and everything on its disk goes with it. So the run
# folder (checkpoint, tokenizer, a readable `checkpoint.json`) lives on Google Drive when you allow it,
# else in `runs/` of the repository (or of the current folder). The folder name carries the preset: a checkpoint only resumes
# with the configuration that made it. Quick mode uses a fresh temporary folder every time, so a test
# run never resumes someone's stale state.

# %%
DRIVE = None
if QUICK:
    RUN_DIR = Path(tempfile.mkdtemp(prefix="03_scratch-"))
else:
    DRIVE = colab.mount_drive(ask=True)  # None outside Colab, or when you say no
    RUN_DIR = (DRIVE or runtime.repo_root() or Path.cwd()) / "runs" / f"03_scratch-{PRESET}"
RUN_DIR.mkdir(parents=True, exist_ok=True)
print(
    "run folder:", RUN_DIR, "(holds a checkpoint: this run resumes)" if ckpt.find_checkpoint(RUN_DIR) else "(new run)"
)

# %% [markdown]
# ## 1. The data
#
# **Full mode: Tatoeba.** About 167,000 French–English sentence pairs collected by volunteers of
# the Tatoeba project and packaged by manythings.org. Licence CC-BY 2.0; attribution:
# *www.manythings.org/anki and tatoeba.org*. The file is found next to the repository if you have it,
# otherwise downloaded once and cached (on Drive when it is mounted).
#
# **Quick mode: the built-in corpus.** It is **synthetic**: a small bilingual grammar generates each
# French sentence together with its English translation. It lets the notebook run offline in seconds;
# a score on it says that the code learns, not how well it translates French.
#
# One call does the whole pipeline of `helpers.data`, the same call `python -m helpers train` makes:
# load, clean (normalise spaces, drop empty, over-long and badly balanced pairs, duplicates), split
# into train, validation and test, train a sentencepiece tokenizer **on the training split only**
# (saved in the run folder, and reused when the run resumes, so the vocabulary never changes under a
# checkpoint), encode, and batch. Every step reports what it kept and what it dropped, and why.

# %%
if QUICK:
    DATA = "builtin"
    print(corpus.describe_corpus(), "\n")
else:
    DATA = str(S.find_local_tatoeba() or S.fetch_tatoeba(cache_dir=DRIVE))
prepared = D.prepare_data(DATA, cfg, RUN_DIR, seed=SEED, limit=DATA_LIMIT)
tok = prepared.tokenizer
for report in prepared.reports.values():
    print(report, end="\n\n")
print(f"{tok}; {len(prepared.test_pairs):,} test pairs held out")

# %% [markdown]
# **No test sentence may leak into training.** If a test sentence, or its reference translation, were a
# training example, the model could recite it and the score would measure memory instead of translation.
# Tatoeba makes this easy to get wrong: it has many French variants of one English sentence ("Va !",
# "Bouge !" and "Pars !" are all "Go."), so splitting by French sentence alone would put "Go." in the test
# set as a reference *and* in the training set as a target. `split_pairs` therefore keeps every group of
# pairs linked by a shared French or English sentence in one split, and counts what could still go wrong:
# the `checks:` line of the split report above must read 0, 0, 0. The check below also recounts, in
# tokens, against the training examples the model actually sees. (The tokenizer is trained on the
# training split only, too: pieces learnt from test sentences would be a subtler leak.)


# %% tags=["check"]
def check_no_leak(split_report, train_examples, test_pairs, tok):
    """No test French sentence is a training source, and no test reference is a training target."""
    assert split_report.french_in_two_splits == 0, "the split report counts French sentences in two splits"
    assert split_report.test_english_in_train == 0, "the split report counts test references that are training targets"
    sources = {tuple(ex.input_ids[1 : ex.prefix_len - 1]) for ex in train_examples}  # between <bos> and <sep>
    targets = {tuple(ex.input_ids[ex.prefix_len : -1]) for ex in train_examples}  # between <sep> and <eos>
    fr_ids = tok.encode_batch([fr for fr, _ in test_pairs])
    en_ids = tok.encode_batch([en for _, en in test_pairs])
    leaked = [fr for (fr, _), ids in zip(test_pairs, fr_ids) if tuple(ids) in sources]
    assert not leaked, f"{len(leaked)} test sentences are also training sources, e.g. {leaked[:3]}"
    recited = [en for (_, en), ids in zip(test_pairs, en_ids) if tuple(ids) in targets]
    assert not recited, f"{len(recited)} test references are also training targets, e.g. {recited[:3]}"


check_no_leak(prepared.reports["split"], prepared.train_batcher.examples, prepared.test_pairs, tok)
print(f"✓ none of the {len(prepared.test_pairs):,} test pairs appears in training")

# %% [markdown]
# ### One training example
#
# A pair becomes one sequence, `<bos> French <sep> English <eos>`; `prefix_len` counts the tokens up to
# and including `<sep>`. The model predicts every next token, but the **loss** is taken only where the
# next token is English or `<eos>`: the French is given, not predicted. So the label of position $t$ is
# the token at $t+1$ (shifted by one), and $-100$ (ignored by the loss) wherever the next token is French
# or padding. The first scored position is `<sep>`, which must produce the first English piece.

# %%
EXAMPLE = ("Je n'ai pas vu le chat.", "I didn't see the cat.")
example = TK.make_example(tok, *EXAMPLE, max_len=cfg.max_len)
one = TK.collate([example])
pieces = [tok.id_to_piece(i) for i in example.input_ids]
print(f"prefix_len = {example.prefix_len} (<bos>, {example.prefix_len - 2} French pieces, <sep>)\n")
print(f"{'pos':>3}  {'piece':<12}{'id':>5}  {'part':<7} label (the next token)")
for t, (piece, i, label) in enumerate(zip(pieces, example.input_ids, one.labels[0].tolist())):
    part = "French" if t < example.prefix_len else "English"
    print(
        f"{t:>3}  {piece:<12}{i:>5}  {part:<7} "
        + (f"{tok.id_to_piece(label)}" if label >= 0 else "-100 (not in the loss)")
    )

# %% [markdown]
# The same as a figure for the report: which positions the loss sees.


# %%
def plot_example(pieces, labels, prefix_len):
    T_ = len(pieces)
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * T_), 2.2))
    rows = ["input", "label", "in loss"]
    for t in range(T_):
        scored = labels[t] >= 0
        source = t < prefix_len
        colours = [
            "#cfe2f3" if source else "#fce5cd",
            "#d9ead3" if scored else "#eeeeee",
            "#6aa84f" if scored else "#cccccc",
        ]
        texts = [pieces[t], tok.id_to_piece(labels[t]) if scored else "−100", "yes" if scored else "no"]
        for r, (colour, text) in enumerate(zip(colours, texts)):
            ax.add_patch(plt.Rectangle((t, 2 - r), 1, 1, facecolor=colour, edgecolor="white"))
            ax.text(t + 0.5, 2.5 - r, text, ha="center", va="center", fontsize=7, rotation=90 if len(text) > 5 else 0)
    ax.set_xlim(0, T_), ax.set_ylim(0, 3)
    ax.set_yticks([2.5, 1.5, 0.5], rows)
    ax.set_xticks(np.arange(T_) + 0.5, range(T_), fontsize=6)
    ax.set_xlabel("position  (blue: <bos> French <sep>; orange: English <eos>)")
    ax.set_title(
        f"One example: prefix_len = {prefix_len}; the loss sees {sum(label >= 0 for label in labels)} of {T_} positions"
    )
    for side in ax.spines.values():
        side.set_visible(False)
    fig.tight_layout()
    return fig


fig = plot_example(pieces, one.labels[0].tolist(), example.prefix_len)
save_figure(fig, "03_example_format")
plt.show()

# %% [markdown]
# The check builds a batch of two examples of different lengths with `helpers.data.collate` and
# compares every label with the rule, position by position. It fails on the usual mistakes: labels not
# shifted (the model would learn to copy its input), the loss mask covering the French too, padding
# counted as target.


# %% tags=["check"]
def check_example_format(collate_fn, tok=tok, max_len=cfg.max_len):
    examples = [TK.make_example(tok, *EXAMPLE, max_len=max_len), TK.make_example(tok, "Oui.", "Yes.", max_len=max_len)]
    batch = collate_fn(examples)
    ids, labels = batch.input_ids.tolist(), batch.labels.tolist()
    for b, ex in enumerate(examples):
        L, P = len(ex.input_ids), ex.prefix_len
        assert ids[b][0] == tok.bos_id and ids[b][P - 1] == tok.sep_id, (
            f"row {b}: expected <bos> first and <sep> at prefix_len - 1"
        )
        assert ids[b][:L] == ex.input_ids and all(i == tok.pad_id for i in ids[b][L:]), (
            f"row {b}: tokens then right padding"
        )
        for t in range(len(ids[b])):
            want = ids[b][t + 1] if P - 1 <= t < L - 1 else -100
            assert labels[b][t] == want, (
                f"row {b} position {t}: label {labels[b][t]}, expected {want}. Labels are the next token, and -100 "
                "wherever the next token is French or padding"
            )
    assert batch.n_target_tokens == sum(len(ex.input_ids) - ex.prefix_len for ex in examples), (
        "n_target_tokens miscounted"
    )


check_example_format(TK.collate)
print("✓ labels are the next token, on English and <eos> only")

# %% [markdown]
# ### How long are the sentences?
#
# **Question: how many tokens does a pair take, and what does `max_len` cut off?** A model's cost grows
# with the sequence length (attention quadratically), so the preset's `max_len` is chosen to keep nearly
# every pair; the encoding report above counts the training pairs dropped as too long. The histogram
# shows the held-out test pairs, all of them (a random sample of the same sentences, nothing dropped).

# %%
test_len = TK.pair_lengths(prepared.test_pairs, tok)  # tokens per side
whole = test_len["fr"] + test_len["en"] + 3  # <bos>, <sep>, <eos>
dropped = prepared.reports["encode_train"].dropped_too_long
fig, ax = plt.subplots(figsize=(6, 3.2))
bins = np.arange(0, whole.max() + 2)
ax.hist(test_len["fr"], bins=bins, alpha=0.6, label="French")
ax.hist(test_len["en"], bins=bins, alpha=0.6, label="English")
ax.hist(whole, bins=bins, histtype="step", color="black", label="<bos> French <sep> English <eos>")
ax.axvline(cfg.max_len + 0.5, color="red", ls="--", label=f"max_len = {cfg.max_len}")
ax.set_xlabel("tokens")
ax.set_ylabel("test pairs")
ax.set_title(
    f"{(whole > cfg.max_len).mean():.1%} of the pairs are longer than max_len ({dropped:,} training pairs dropped)",
    fontsize=10,
)
ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, "03_lengths")
plt.show()

# %% [markdown]
# ### Batches of similar lengths
#
# A batch is a rectangle: every row is padded to its longest sentence, and padding costs as much compute
# as real tokens. `BucketBatcher` sorts the (shuffled) examples by length and cuts them into batches of
# at most `max_tokens` tokens, padding included, then shuffles the batch order, so a batch holds many
# short sentences or a few long ones. Compare with batches drawn in random order:

# %%
bucketed = prepared.train_batcher.stats()
shuffled = TK.BucketBatcher(prepared.train_batcher.examples, max_tokens=cfg.max_tokens, seed=SEED, bucket=False).stats()
for name, s in (("bucketed by length", bucketed), ("random order", shuffled)):
    print(
        f"{name:>19}: {s['batches']:>6,} batches, {s['mean_batch_size']:6.1f} sentences each, "
        f"padding {100 * s['padding_fraction']:5.1f}% of the tokens computed"
    )

# %% [markdown]
# ## 2. The model
#
# The decoder-only Transformer of notebook 02, from `helpers.model`, with a prefix-LM mask (the French
# sees itself in both directions; the English sees the French and, causally, itself). The preset sets
# its size: `tiny` for quick mode, `cpu` for two CPU cores, `t4` for an hour on a T4. The seed is set
# right before the model is built, as `python -m helpers train` does, so both start from the same weights.

# %%
runtime.set_seed(SEED)
model_cfg = cfg.model_config(tok.vocab_size, DEVICE)
model = DecoderOnlyTransformer(model_cfg)
N_PARAMS = num_parameters(model_cfg)
print(
    f"{N_PARAMS:,} parameters: {model_cfg.n_layer} layers, d_model {model_cfg.d_model}, {model_cfg.n_head} heads, "
    f"d_ff {model_cfg.d_ff}, vocabulary {model_cfg.vocab_size:,}, max_len {model_cfg.max_len}"
)

# %% [markdown]
# ## 3. The parts of a training step
#
# Every piece below comes from `helpers.train`; the loop in section 4 puts them together.
#
# **AdamW** (`make_optimizer`) with weight decay on the weight matrices only: decaying embeddings pulls
# rare tokens towards zero, and decaying LayerNorm gains fights the normalisation. On CUDA it uses the
# fused kernel (one launch for the whole update).
#
# **Warm-up, then cosine decay** (`lr_at`). At the start, Adam's estimates of the gradient's scale are
# poor and the weights are random, so large steps can throw the model into a bad region; the learning
# rate therefore rises linearly over `warmup_steps`. Afterwards it follows half a cosine down to
# `min_lr_ratio` × the peak: large steps while far from a good solution, small ones to settle at the end.
# With a *time* budget the number of steps is not known in advance, so `Budget.total_steps` estimates it
# from the pace so far, and the cosine ends when the time does.

# %%
steps_shown = 2000 if TRAIN_STEPS is None else TRAIN_STEPS
lrs = [T.lr_at(s, cfg, steps_shown) for s in range(steps_shown)]
fig, ax = plt.subplots(figsize=(5, 2.6))
ax.plot(lrs)
ax.axvline(cfg.warmup_steps, color="grey", ls=":", label=f"end of warm-up ({cfg.warmup_steps} steps)")
ax.set_xlabel(
    f"step (of {steps_shown:,}" + (", as if the time budget allowed that many)" if TRAIN_STEPS is None else ")")
)
ax.set_ylabel("learning rate")
ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, "03_lr_schedule")
plt.show()

# %% [markdown]
# **Label smoothing** (`loss_fn(..., label_smoothing=0.1)`). Cross-entropy against a one-hot target is
# lowest when the model puts probability 1 on the right token, so it keeps pushing that logit up forever.
# With smoothing $\varepsilon$ the target is $1-\varepsilon$ on the right token plus $\varepsilon$ spread
# uniformly over the vocabulary; the loss is then lowest at a *finite* confidence. The model becomes less
# over-confident, which hurts perplexity a little and usually helps BLEU (Vaswani et al. used 0.1). The
# validation loss and perplexity below are computed *without* smoothing, so they stay comparable.

# %%
for margin in (2, 5, 10, 20):  # the right token's logit is `margin` above every other one
    logits = torch.zeros(1, 1, tok.vocab_size)
    logits[0, 0, 7] = margin
    plain, smooth = (T.loss_fn(logits, torch.tensor([[7]]), eps).item() for eps in (0.0, cfg.label_smoothing))
    print(
        f"margin {margin:>2}: p(right) = {torch.softmax(logits[0, 0], -1)[7]:.4f}  loss {plain:.4f}  smoothed {smooth:.4f}"
    )

# %% [markdown]
# Without smoothing the loss keeps falling as the margin grows; with it, the loss turns back up once the
# model is more confident than $1-\varepsilon$ warrants.
#
# **Gradient clipping** rescales the whole gradient when its norm exceeds `grad_clip`, so one unusual
# batch cannot undo hours of training.
#
# **Mixed precision.** Matrix products in 16-bit floats run several times faster on a GPU's tensor cores
# and halve the memory traffic. There are two 16-bit formats:
#
# * **fp16** keeps 10 bits of mantissa but only 5 of exponent: nothing above 65,504, and nothing below
#   about $6 \times 10^{-8}$. Many gradients are smaller than that and would silently become 0. So
#   `make_scaler` gives a **GradScaler**: it multiplies the loss by a large factor (65,536 to start) before
#   `backward`, so the gradients are scaled up into fp16's range, divides them back (`unscale_`) before
#   clipping and the update, and if any gradient overflowed to inf or NaN it skips that step and halves
#   the factor. A **T4** (compute capability 7.5) has fast fp16 tensor cores and no bf16 units, so there
#   we use fp16 with the scaler.
# * **bf16** keeps fp32's 8 exponent bits (the same range) with only 7 bits of mantissa, so nothing
#   underflows and no scaler is needed. GPUs from Ampere on (A100, L4, H100) have it natively.
#
# `autocast_context` runs the forward pass in the chosen precision while keeping the weights, the
# optimizer and the loss (`loss_fn` works in fp32) in full precision. On a CPU we stay in fp32, unless
# the `cpu` preset finds native bf16 instructions.

# %%
PRECISION = runtime.resolve_precision(DEVICE, cfg.precision)
print(
    f"On {DEVICE}: precision {PRECISION}; gradient scaler {'on' if T.make_scaler(DEVICE, PRECISION).is_enabled() else 'off (not needed)'}"
)

# %% [markdown]
# **A time budget that ends cleanly.** `Budget(minutes=M)` says when to stop: the loop checks it before
# every step, so the run ends between two steps and saves a final checkpoint. Time already trained in
# earlier sessions counts, so a resumed run ends at the same total.
#
# ## 4. The training loop
#
# The loop below is the whole of training, in the style of nanoGPT: the step is written out, and
# everything around it is one object, `T.TrainingRun`. It is the loop `python -m helpers train` runs
# (`helpers.train.train` holds the same lines), so from the same seed both end with identical weights
# (`tests/test_notebook03.py` checks that), and a run started here can be finished from the command line.
#
# What `TrainingRun` does, so that the step does not have to:
#
# * **On creation** it builds AdamW (`make_optimizer`) and the gradient scaler (`make_scaler`), and if the
#   run folder holds a checkpoint, it first checks that it was made with the same configuration (a
#   different one is refused, naming the field), then restores the weights, the AdamW moments, the scaler,
#   the random-number generators, the batcher's epoch and position, and the counters, and says
#   "Resuming from … at step …".
# * `done()` asks the budget; `next_batch()` continues the data where the checkpoint left it, epoch after
#   epoch; `set_lr()` writes the warm-up-then-cosine rate for the current step into the optimizer.
# * `check_finite` stops with a message naming the step and the last good checkpoint if the loss or the
#   gradients became inf or NaN, *before* the update could spoil the weights (with fp16 the scaler skips
#   such steps instead, and `end_step` counts them).
# * `end_step` counts steps and tokens, updates the progress bar (loss, learning rate, tokens per second,
#   time left), records the training loss every `log_interval` steps and the validation loss and perplexity
#   every `eval_interval` steps, and saves a checkpoint every `checkpoint_minutes`.
# * `finish()` saves the final checkpoint and returns a `TrainResult`.
#
# Inside the step, the order matters: the loss is scaled *before* `backward` (fp16 gradients would
# otherwise underflow to 0), unscaled *before* clipping (the threshold is about the true gradient), and
# checked *before* the update.


# %%
def train_loop(model, batcher, valid_batches, cfg, out_dir, **run_options):
    run = T.TrainingRun(model, batcher, valid_batches, cfg, out_dir, **run_options)  # resumes from out_dir's checkpoint
    while not run.done():
        t0 = time.perf_counter()
        batch = run.next_batch()  # resumes mid-epoch after a disconnect
        lr = run.set_lr()  # warm-up, then cosine decay to the end of the budget
        ids, labels, plen = (
            t.to(run.device, non_blocking=True) for t in (batch.input_ids, batch.labels, batch.prefix_len)
        )
        with T.autocast_context(run.device, run.precision):  # fp16 on a T4, bf16 where native, fp32 on CPU
            logits = model(ids, plen)  # (B, T, vocab)
        loss = T.loss_fn(logits, labels, cfg.label_smoothing)  # English tokens and <eos> only, in fp32
        run.scaler.scale(loss).backward()  # fp16: scaled up so small gradients survive
        run.scaler.unscale_(run.optimizer)  # true gradients again, before clipping
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        run.check_finite(loss, grad_norm)  # never step on inf/NaN
        run.scaler.step(run.optimizer)  # fp16: skipped when a gradient overflowed
        run.scaler.update()
        run.optimizer.zero_grad(set_to_none=True)
        run.end_step(batch, loss, lr, time.perf_counter() - t0)  # bar, history, validation, checkpoints
    return run.finish()  # the final checkpoint, and a TrainResult


# %% [markdown]
# **Is it still learning when the time runs out?** The plot below answers that: training loss (with label
# smoothing, so it never reaches 0) and validation loss (without), against the number of English tokens
# seen. In a live notebook it redraws at every validation; headless, it is drawn once at the end.


# %%
def draw_losses(axes, history):
    ax, ax_lr = axes
    ax.clear(), ax_lr.clear()
    train = [h for h in history if "loss" in h]
    val = [h for h in history if "val_loss" in h]
    ax.plot([h["tokens"] / 1e6 for h in train], [h["loss"] for h in train], label="training (label-smoothed)")
    ax.plot([h["tokens"] / 1e6 for h in val], [h["val_loss"] for h in val], "o-", label="validation")
    if val:
        ax.set_title(f"validation loss {val[-1]['val_loss']:.3f}, perplexity {val[-1]['val_ppl']:.1f}", fontsize=9)
    ax.set_xlabel("English tokens seen (millions)")
    ax.set_ylabel("cross-entropy per token")
    ax.legend(fontsize=8)
    ax_lr.plot([h["step"] for h in history], [h["lr"] for h in history], color="tab:green")
    ax_lr.set_xlabel("step")
    ax_lr.set_ylabel("learning rate")


loss_fig, loss_axes = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [2, 1]})
live = None
if in_live_kernel():
    from IPython.display import display

    plt.close(loss_fig)  # shown through the display handle only, not again by the inline backend
    handle = display(loss_fig, display_id=True)

    def live(record, history):
        if "val_loss" in record:
            draw_losses(loss_axes, history)
            handle.update(loss_fig)

# %% [markdown]
# Now train. `extra_config` records which data the run used: a checkpoint made from other data (another
# file, or the same file split with another seed) is refused. If this cell was interrupted, or Colab
# disconnected, run the notebook again: the loop finds the checkpoint in the run folder and says
# "Resuming from … at step …".

# %%
EXTRA = {"data": {k: v for k, v in prepared.info.items() if k != "pairs"}}
result = train_loop(
    model,
    prepared.train_batcher,
    prepared.valid_batches,
    cfg,
    RUN_DIR,
    device=DEVICE,
    extra_config=EXTRA,
    callback=live,
)
print(
    f"{result.steps:,} steps, {result.tokens:,} English tokens in {result.seconds / 60:.1f} min "
    f"({result.tokens_per_s:,.0f} tokens/s); validation loss {result.val_loss:.3f}, perplexity {result.val_ppl:.1f}"
)
print("checkpoint:", result.checkpoint)

# %%
draw_losses(loss_axes, result.history)
loss_fig.tight_layout()
save_figure(loss_fig, "03_loss")
if live is not None:
    handle.update(loss_fig)  # the plot above, in its final state
    display(loss_fig)
else:
    plt.show()

# %% [markdown]
# ### Checkpoints and resuming
#
# Every `checkpoint_minutes` and at the end, the loop writes `checkpoint.pt`: the weights, the AdamW
# moments, the gradient scaler, the step, the random-number generators (Python, NumPy, torch, CUDA), the
# batcher's epoch and position, and the configuration. It is written to a temporary file and then renamed
# over the old one, so a disconnect in the middle of a save leaves the previous checkpoint intact, and it is
# read with `torch.load(..., weights_only=True)`, which never runs code stored in the file.
#
# Running the training cell again on a finished run does nothing more (the budget is spent):

# %%
again = train_loop(
    model,
    prepared.train_batcher,
    prepared.valid_batches,
    cfg,
    RUN_DIR,
    device=DEVICE,
    extra_config=EXTRA,
    progress=False,
)
print(f"still step {again.steps:,}")

# %% [markdown]
# **Does a resumed run end exactly where an uninterrupted one would?** It should, if the checkpoint holds
# *everything* that influences the next step: forget Adam's moments, and the first steps after the
# restart are the large, noisy steps of a fresh optimizer; forget the random state, and dropout draws
# other masks; forget the data position, and the model sees some batches twice and others never.
#
# The check runs three short runs of the `tiny` model on the CPU (a step budget, so that they are
# exactly reproducible): one uninterrupted; one that "disconnects" at step 25, after its checkpoint at
# step 20; and a fresh start with *different* initial weights in the same folder, which resumes from
# step 20. Its final weights must equal the uninterrupted run's, bit for bit. Then it tries to resume
# that folder with another learning rate: refused, with a message naming the field.


# %% tags=["check"]
class Disconnect(Exception):
    """Stands in for a Colab runtime that goes away in the middle of training."""


def check_resume(loop_fn, examples, vocab_size, workdir, steps=RESUME_STEPS):
    rcfg = C.preset_config(
        "tiny",
        steps=steps,
        checkpoint_every_steps=10,
        checkpoint_minutes=1e6,
        log_interval=5,
        eval_interval=20,
        seed=SEED,
    )
    small = [ex for ex in examples if len(ex.input_ids) <= rcfg.max_len][:400]
    valid = list(TK.BucketBatcher(small[-50:], max_tokens=rcfg.max_tokens, shuffle=False))
    workdir = Path(workdir)

    def fresh(seed=SEED):
        runtime.set_seed(seed)
        return DecoderOnlyTransformer(rcfg.model_config(vocab_size)), TK.BucketBatcher(
            small, max_tokens=rcfg.max_tokens, seed=SEED
        )

    straight, batcher = fresh()
    loop_fn(straight, batcher, valid, rcfg, workdir / "straight", progress=False)

    def pull_the_plug(record, history):
        if record["step"] >= 25:
            raise Disconnect()

    cut, batcher = fresh()
    try:
        loop_fn(cut, batcher, valid, rcfg, workdir / "cut", progress=False, callback=pull_the_plug)
        raise AssertionError("the simulated disconnect did not happen")
    except Disconnect:
        pass
    assert ckpt.load_checkpoint(workdir / "cut")["step"] == 20, "expected the checkpoint of step 20 to survive"
    resumed, batcher = fresh(seed=SEED + 1)  # a new runtime: other initial weights, a fresh optimizer
    result = loop_fn(resumed, batcher, valid, rcfg, workdir / "cut", progress=False)
    assert result.resumed_from == 20 and result.steps == steps, (
        f"resumed from {result.resumed_from}, ended at {result.steps}"
    )
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), (
            f"{name} differs between the uninterrupted and the resumed run (max {(a - b).abs().max():.2e}): the checkpoint "
            "misses part of the state (optimizer moments, scaler, RNG states or data position)"
        )
    other, batcher = fresh()
    try:
        loop_fn(other, batcher, valid, replace(rcfg, lr=2 * rcfg.lr), workdir / "cut", progress=False)
    except ckpt.ConfigMismatchError as err:
        assert "train.lr" in str(err), f"the refusal does not name the field that differs: {err}"
        print("Refused, as it should be:\n" + str(err))
    else:
        raise AssertionError("a checkpoint made with another learning rate was resumed")


with tempfile.TemporaryDirectory(prefix="03_resume-") as workdir:
    check_resume(train_loop, prepared.train_batcher.examples, tok.vocab_size, workdir)
print("✓ an interrupted and resumed run ends with exactly the weights of an uninterrupted one")

# %% [markdown]
# ## 5. Translating
#
# To translate, the model reads `<bos> French <sep>` and writes English one piece at a time until it
# writes `<eos>`. `helpers.evaluate.translate` batches sentences of similar length, and
# `model.generate` keeps each layer's keys and values in a cache, so every step computes only the new
# token (notebook 02 built the same cache by hand). How many new tokens may a sentence get?
# `max_new_tokens_for` allows twice the source length plus 10, never past `max_len`: a budget that
# scales with the source stops a model that fails to write `<eos>` from rambling on.
#
# **Greedy** decoding takes the most likely piece at every step. **Beam search** keeps the `BEAMS` best
# partial translations by total log-probability, and returns the best finished one (its score divided by
# its length, so that short translations are not favoured merely for having fewer factors below 1).

# %%
model.eval()
test_pairs = prepared.test_pairs
sources, references = [fr for fr, _ in test_pairs], [en for _, en in test_pairs]
n_beam = len(sources) if BEAM_SENTENCES is None else min(BEAM_SENTENCES, len(sources))
for src in [s for s in sources if len(TK.prompt_ids(tok, s)) <= cfg.max_len // 2][:2]:
    plen = len(TK.prompt_ids(tok, src))
    print(f"{src!r}: a prefix of {plen} tokens may get up to {E.max_new_tokens_for(plen, cfg.max_len)} new tokens")

greedy_report, beam_report = E.TranslateReport(), E.TranslateReport()
greedy = E.translate(model, tok, sources, beams=1, report=greedy_report)
beam = E.translate(model, tok, sources[:n_beam], beams=BEAMS, report=beam_report)
for name, rep in (("greedy", greedy_report), (f"beam {BEAMS}", beam_report)):
    print(
        f"{name:>7}: {rep.sentences:,} sentences in {rep.seconds:.1f} s ({rep.sentences / max(rep.seconds, 1e-9):,.0f}/s); "
        f"{len(rep.truncated)} sources truncated to fit max_len"
    )

# %% [markdown]
# ## 6. Scoring: BLEU, chrF, and a baseline
#
# **BLEU** compares the n-grams (runs of 1 to 4 words) of our translations with those of the references,
# over the whole test set: the geometric mean of the four n-gram precisions (each n-gram counted at most
# as often as it occurs in the reference), times a brevity penalty for output shorter than the
# references. 0 to 100; on one reference per sentence, as here, a human translator would not score 100.
# **chrF** is an F-score over character n-grams (up to 6 characters, recall weighted twice as much as
# precision): it gives partial credit for a word with the wrong ending, and is more stable on short sentences.
#
# Both depend on details: tokenization of the text, lowercasing, smoothing, the number of references.
# sacreBLEU fixes them and prints a **signature** such as `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.3`;
# two scores are comparable only if their signatures match. We score detokenized text (what a user reads),
# with sacreBLEU's defaults, and always print the signature next to the number.
#
# **A baseline.** A score alone does not say whether the model translates. The copy baseline "translates"
# by returning the French unchanged; names ("Tom"), numbers, punctuation and cognates ("important",
# "possible") already match the English reference, so it scores above 0. It plays the role of "predict
# London for everyone" in a classification task: the model has to beat it by a wide margin.

# %%
scores = {"greedy": E.score(greedy, references), f"beam{BEAMS}": E.score(beam, references[:n_beam])}
baseline = E.copy_baseline(sources, references)
for name, s in [*scores.items(), ("copy the source", baseline)]:
    print(f"{name:>15}: BLEU {s['bleu']:5.2f}  chrF {s['chrf']:5.2f}   ({s['n']:,} sentences)")
print("\nBLEU signature:", scores["greedy"]["bleu_signature"])
print("chrF signature:", scores["greedy"]["chrf_signature"])

# %% [markdown]
# The check asks for more than a number: our translations must beat the copy baseline, and they must
# beat *themselves* scored against the wrong references (each hypothesis paired with the next sentence's
# reference). The second test catches translations that come back in another order than the sources, a
# classic bug when sentences are sorted by length for batching and not put back.


# %% tags=["check"]
def check_scores(hypotheses, references, sources):
    assert len(hypotheses) == len(references) == len(sources), "one translation per source and reference"
    ours, copy = E.score(hypotheses, references), E.copy_baseline(sources, references)
    assert ours["bleu"] > copy["bleu"] and ours["chrf"] > copy["chrf"], (
        f"BLEU {ours['bleu']} / chrF {ours['chrf']} do not beat copying the source ({copy['bleu']} / {copy['chrf']})"
    )
    shifted = E.score(hypotheses, references[1:] + references[:1])
    assert ours["bleu"] > 2 * shifted["bleu"] and ours["chrf"] > shifted["chrf"] + 5, (
        f"scored against the wrong references the translations get BLEU {shifted['bleu']} (vs {ours['bleu']}), chrF "
        f"{shifted['chrf']} (vs {ours['chrf']}): are the translations in the order of the sources?"
    )


check_scores(greedy, references, sources)
print("✓ better than copying the source, and aligned with the references")

# %% [markdown]
# Sample translations, the same rows every run:

# %%
rows = E.sample_table(sources[:n_beam], references[:n_beam], greedy[:n_beam], n=8, seed=SEED)
rows_beam = E.sample_table(sources[:n_beam], references[:n_beam], beam, n=8, seed=SEED)  # same seed: same rows
for row, row_beam in zip(rows, rows_beam):
    row["greedy"] = row.pop("ours")
    row[f"beam {BEAMS}"] = row_beam["ours"]
print(E.format_table(rows, width=48))

# %% [markdown]
# ### Where does the model look?
#
# **When the model writes an English word, which French pieces does it attend to?** Each panel shows one
# test sentence: a row per English piece the model wrote (with greedy decoding), a column per source
# position, the attention weight averaged over the heads of one layer. The rows do not sum to 1 here:
# the rest of each row's weight goes to the English written so far, which is not shown. Read the row of a
# piece as the attention of the position that *produced* it (the position before it).


# %%
def attention_panels(model, sentences, layer=-1):
    dev = next(model.parameters()).device
    fig, axes = plt.subplots(1, len(sentences), figsize=(4.2 * len(sentences), 4.2), squeeze=False)
    for ax, fr in zip(axes[0], sentences):
        prompt = TK.prompt_ids(tok, fr)
        new = model.generate([prompt], E.max_new_tokens_for(len(prompt), cfg.max_len), eos_id=tok.eos_id)[0]
        ids = prompt + new + [tok.eos_id]
        P = len(prompt)
        maps = model.attention_maps(torch.tensor([ids], device=dev), torch.tensor([P], device=dev))
        w = maps[layer][0].mean(0)[P - 1 : len(ids) - 1, :P].float().cpu().numpy()  # (written pieces, source positions)
        ax.imshow(w, cmap="Blues", vmin=0, aspect="auto")
        ax.set_xticks(range(P), [tok.id_to_piece(i) for i in prompt], rotation=90, fontsize=7)
        ax.set_yticks(range(len(ids) - P), [tok.id_to_piece(i) for i in ids[P:]], fontsize=7)
        ax.set_title(f"“{tok.decode(new)}”", fontsize=8)
    fig.suptitle(
        f"Attention of each written English piece over the source (layer {layer % model.config.n_layer}, mean of heads)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


short = [fr for fr in sources if 4 <= len(fr.split()) <= 7]
picked = [short[i] for i in np.linspace(0, len(short) - 1, 3).astype(int)] if len(short) >= 3 else sources[:3]
fig = attention_panels(model, picked)
save_figure(fig, "03_attention_heatmaps")
plt.show()

# %% [markdown]
# ### Which sentences are hard?
#
# **Does the score fall with the length of the source?** Longer sentences have more ways to go wrong, and
# they are rarer in Tatoeba, so the model has seen fewer of them. BLEU per bucket of source length (in
# words), with the number of test sentences in each bucket:

# %%
by_length = {
    "greedy": E.bleu_by_length(sources, greedy, references),
    f"beam {BEAMS}": E.bleu_by_length(sources[:n_beam], beam, references[:n_beam]),
}
buckets = [r["bucket"] for r in by_length["greedy"]]
fig, ax = plt.subplots(figsize=(6.5, 3.2))
width = 0.4
for k, (name, rows_) in enumerate(by_length.items()):
    got = {r["bucket"]: r for r in rows_}
    ax.bar(
        np.arange(len(buckets)) + (k - 0.5) * width,
        [got.get(b, {"bleu": 0})["bleu"] for b in buckets],
        width,
        label=name,
    )
ax.set_xticks(range(len(buckets)), [f"{r['bucket']}\n({r['n']:,})" for r in by_length["greedy"]])
ax.axhline(baseline["bleu"], color="grey", ls="--", label=f"copy baseline ({baseline['bleu']:.1f})")
ax.set_xlabel("source length in words (test sentences)")
ax.set_ylabel("BLEU")
ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, "03_bleu_by_length")
plt.show()

# %% [markdown]
# ## 7. The checkpoint is the model
#
# `python -m helpers translate` and `evaluate` load the run folder with `helpers.evaluate.load_run`. The
# check makes sure that what they load is exactly the model we just scored.


# %% tags=["check"]
def check_checkpoint_is_model(model, run_dir, steps):
    run = E.load_run(run_dir, device="cpu")
    mine = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    assert run.step == steps, f"the checkpoint is from step {run.step}, training ended at step {steps}"
    for name, saved in run.model.state_dict().items():
        assert torch.equal(saved, mine[name]), f"{name} in {run_dir} differs from the trained model"


check_checkpoint_is_model(model, RUN_DIR, result.steps)
print(f"✓ {RUN_DIR} holds the trained model")

# %% [markdown]
# ## 8. For the report
#
# Everything a report needs, in `reports/metrics/03_scratch.json`: the scores with their signatures, the
# baseline, the size of the model, how long it trained on what hardware, and the full configuration.

# %%
metrics = {
    "notebook": "03_translate_fr_en",
    "quick": QUICK,
    "data": {
        **prepared.info,
        "synthetic": DATA == "builtin",
        "attribution": None if DATA == "builtin" else "CC-BY 2.0: www.manythings.org/anki and tatoeba.org",
    },
    "test_sentences": len(sources),
    "bleu": scores["greedy"]["bleu"],
    "chrf": scores["greedy"]["chrf"],
    "bleu_signature": scores["greedy"]["bleu_signature"],
    "chrf_signature": scores["greedy"]["chrf_signature"],
    "decoding": {name: {"bleu": s["bleu"], "chrf": s["chrf"], "sentences": s["n"]} for name, s in scores.items()},
    "copy_baseline": {"bleu": baseline["bleu"], "chrf": baseline["chrf"]},
    "bleu_by_length": by_length,
    "sentences_per_s": {
        "greedy": round(greedy_report.sentences / max(greedy_report.seconds, 1e-9), 1),
        f"beam{BEAMS}": round(beam_report.sentences / max(beam_report.seconds, 1e-9), 1),
    },
    "parameters": N_PARAMS,
    "steps": result.steps,
    "minutes_trained": round(result.seconds / 60, 2),
    "tokens_seen": result.tokens,
    "tokens_per_s": round(result.tokens_per_s, 1),
    "val_loss": result.val_loss,
    "val_ppl": result.val_ppl,
    "precision": PRECISION,
    "hardware": runtime.accelerator().as_dict(),
    "config": {"preset": PRESET, "train": cfg.to_dict(), "model": model_cfg.to_dict()},
    "run_dir": str(RUN_DIR),
    "date": time.strftime("%Y-%m-%d %H:%M"),
}
metrics_path = runtime.metrics_dir() / "03_scratch.json"
metrics_path.write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
print(f"wrote {metrics_path}")
print(
    f"BLEU {metrics['bleu']:.2f} | chrF {metrics['chrf']:.2f} | copy baseline BLEU {baseline['bleu']:.2f} | "
    f"{N_PARAMS / 1e6:.2f} M parameters | {metrics['minutes_trained']:.1f} min on {metrics['hardware']['name']}"
)

# %% [markdown]
# ## What we did
#
# We trained the Transformer of notebook 02 on real French–English pairs within a time budget, with the
# standard recipe (AdamW, warm-up and cosine, label smoothing, clipping, mixed precision), checkpointed it
# so that a disconnect costs minutes rather than the run, and scored it on sentences it never saw with
# reproducible metrics and a baseline. Notebook 04 compares it with a pretrained translation model.

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
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/04_pretrained_comparison.ipynb) [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.com/kernels/welcome?src=https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/solutions/04_pretrained_comparison.ipynb)
#
# **Solutions**: the solved notebook, with model answers and grading rubrics. Learners start from the exercise version, [`notebooks/04_pretrained_comparison.ipynb`](https://github.com/transformers-by-building/course/blob/v0.3.0/notebooks/04_pretrained_comparison.ipynb).

# %% [markdown]
# # 04 · Fine-tuning pretrained models, and comparing them with ours fairly
#
# Notebook 03 trained our Transformer from nothing on 150,000 Tatoeba pairs (the `cpu` preset sizes it to
# the machine, 1.8 to 7.5 M parameters; the `t4` preset's size is in its row of the table below). The course's
# question is whether that was worth it: *compare its performance with fine-tuning a pretrained model instead.*
# This notebook answers with a comparison in which only the model changes:
#
# - **the same training pairs** (the same file, cleaning, seed and leak-free split as notebook 03, hence
#   the same test sets; checked below when notebook 03's record is found);
# - **the same test sets**: new sentences (the honest headline), in-distribution, and out of domain;
#   with the same slices, among them *sentences holding a French word that no training pair holds*;
# - **the same scoring**: `helpers.evaluation.evaluate.evaluate_pairs`, the function notebook 03 used, sacreBLEU with
#   its signature, greedy and beam 4 with the same length penalty (Hugging Face's `generate` and our beam
#   search agree on the idea but differ in details, such as when a beam counts as finished);
# - **the costs beside every score**: parameters (total and trained), minutes and tokens of fine-tuning,
#   sentences per second when translating. Minutes count fine-tuning only: pretraining (SmolLM2: about 2
#   trillion tokens; opus-mt: OPUS, a large collection of translated sentences) cost orders of magnitude
#   more, paid once by someone else.
#
# The contestants:
#
# 1. **`Helsinki-NLP/opus-mt-fr-en`**, a MarianMT encoder-decoder of 75 M parameters trained for French→English
#    on OPUS: scored as it is, then fine-tuned on our pairs. OPUS *includes Tatoeba*, so its Tatoeba scores may
#    include sentences it has already seen: lean on the out-of-domain set for it.
# 2. **`HuggingFaceTB/SmolLM2-135M`**, a decoder-only language model like ours (though it reads the French
#    left to right only, where ours reads it in both directions), 18 to 74 times the `cpu` preset's model, pretrained on
#    English web text, code and maths: first with a three-example prompt (*few-shot*, no training), then
#    fine-tuned in exactly our format, `<bos> French <sep> English <eos>`, loss on the English only.
# 3. **Our scratch model** from notebook 03 (its checkpoint; if it is missing, this notebook says so and
#    trains a small one briefly, labelled as such).
#
# **What you will learn**: what a pretrained model brings to a task it was not trained for; how to teach a
# decoder-only LM a task format with its own special tokens; why the loss must skip the prompt; how to
# fine-tune within a time budget in fp16 on a T4 and resume after a disconnect; and what pretraining costs
# (section 8 asks you).
#
# **What you write** (10 points): the prompt and labels of our format for a decoder-only LM (Exercise 4.1), a
# padded batch whose padding the loss never sees (Exercise 4.2), the paired bootstrap test that says whether a
# BLEU difference is more than the luck of the test set (Exercise 4.3), and the rule that flags fluent-but-wrong
# outputs (Exercise 4.4); then three written questions (Questions 4.1 to 4.3, 8 points, graded by hand) on what
# pretraining buys and what it costs, answered from the numbers.
#
# **How to run.** On Colab with a T4: *Run all*; say yes to Google Drive so that fine-tuning checkpoints
# survive a disconnect (running all again resumes). Planned budget: 15 minutes of fine-tuning for opus-mt,
# 25 for SmolLM2, the rest loading and scoring: about an hour, *an estimate not yet measured on a T4*.
# Quick mode (`python -m helpers run-notebooks --only 04`, the tests) runs every code path offline in under a
# minute on two CPU cores (48 s measured) with **tiny random models built from configurations**: their scores say
# that the code runs, nothing about pretraining. From a terminal, the same fine-tuning is
# `python -m helpers finetune --model NAME_OR_PATH --data fra.txt --minutes 25 --out runs/ft-smollm2`, then
# `python -m helpers evaluate --checkpoint runs/ft-smollm2` and `translate --checkpoint` as for our model.
#
# Figures go to `reports/figures/04_*.pdf` and `.png`, the comparison to `reports/metrics/04_comparison.json`.

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
# Budgets. Quick mode: tiny random stand-ins, a few hundred steps. Full mode: the real models.
import torch

DEVICE = runtime.pick_device()
ON_GPU = DEVICE.type == "cuda"
SEQ2SEQ_MODEL = "Helsinki-NLP/opus-mt-fr-en"
CAUSAL_MODEL = "HuggingFaceTB/SmolLM2-135M"  # any causal LM name, local folder or .gguf file works here
MINUTES = {"seq2seq": 15.0, "causal": 25.0} if ON_GPU else {"seq2seq": 10.0, "causal": 15.0}
STEPS = {"seq2seq": 300, "causal": 300} if QUICK else {"seq2seq": None, "causal": None}
BATCH_SIZE = 16 if QUICK else (32 if ON_GPU else 16)
BEAMS = 4
# Beam search with 135 M parameters is slow on a CPU: there, score the first sentences of each set only
EVAL_SENTENCES = 2000 if ON_GPU else 500  # the same first sentences of each set for every model
MONITOR_PAIRS = 100 if QUICK else 300  # validation pairs scored along the way (BLEU against minutes)
if QUICK:
    torch.set_num_threads(1)  # tiny models: a second thread only waits (see notebook 03)
DRIVE = None if QUICK else colab.mount_drive(ask=True)  # notebook 03's run folder, and ours, live there
print(f"device {DEVICE}; fine-tuning budget (minutes) {MINUTES}" + (f", or {STEPS} steps" if QUICK else ""))

# %%
import re
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from helpers import run_folder, scratch_run
from helpers.course.plotting import save_figure
from helpers.evaluation import evaluate, translation
from helpers.hf import finetune, loading, tiny
from helpers.hf.translator import PromptFormat
from helpers.text import data, sources, testsets

# %% [markdown]
# Three small tools for what this notebook prints: minutes as a person reads them (a quarter of a minute is
# "15 s", not "0 min"), the note that quick mode's scores are noise, and the reader of the saved reference
# outputs some checks compare with (`data/reference/`, installed with the package).


# %%
def format_minutes(minutes: float) -> str:
    """Seconds under a minute ("15 s"), else minutes ("2.5 min", "45 min")."""
    if minutes < 1:
        return f"{minutes * 60:.0f} s"
    return f"{minutes:.1f} min" if minutes < 10 else f"{minutes:.0f} min"


load_reference = runtime.reference_outputs  # outputs saved for the checks (data/reference/*.json)


QUICK_NOTE = (
    "QUICK MODE: the Hugging Face models are tiny random stand-ins and every model trained for seconds, so these "
    "numbers are noise: the sentences above say that the code runs, nothing about pretraining."
    if QUICK
    else ""
)
print(format_minutes(0.25), "|", format_minutes(2.54), "|", format_minutes(45.2))

# %% [markdown]
# ## 1. The same pairs and the same test sets as notebook 03
#
# Notebook 03 wrote what it trained on to `03_scratch.json`, in `reports/metrics/` and beside its checkpoint
# (on Google Drive on Colab, where each notebook gets a fresh machine): the data file, the sample size and the
# seed. Loading, cleaning and splitting are deterministic, so the same three arguments give the same training
# pairs and the same test sets; when the record is found, the assert below checks the split sizes against the
# ones notebook 03 recorded. Without it (notebook 03 not run yet), we use notebook 03's defaults, and say so.

# %%
found = scratch_run.find_scratch_data(QUICK, SEED, DRIVE)  # notebook 03's record, when one of this mode is there
scratch_record, DATA, LIMIT, COLUMNS, SEED = found.record, found.data, found.limit, found.columns, found.seed
print(found.note)

stage = data.load_clean_split(DATA, COLUMNS, limit=LIMIT, seed=SEED)  # the data stage of `train` and `finetune`
splits = stage.splits
words = testsets.WordTable.from_pairs(splits.train)
if scratch_record is not None:
    recorded = scratch_record["data"]["pairs"]
    ours = {"train": len(splits.train), "valid": len(splits.valid), "test": len(splits.test), "new": len(splits.new)}
    assert ours == recorded, f"the split differs from notebook 03's: {ours} vs {recorded}"
    print("✓ the same split as notebook 03:", ours)

# %% [markdown]
# The test sets. **New sentences** lead: they hold rarer words and longer sentences, like what people type
# (notebook 03, section 1). **In-distribution** is a random split of the
# training file. **Out of domain**: TICO-19, medical sentences about COVID-19 (CC0), read from a local file when
# there is one (`TICO19_PATH`, or `shared/data/` beside the repository); on Colab, newstest2014 (news text) is
# downloaded instead. In quick mode the sets are cut to 100 sentences (40 out of domain).

# %%
TEST_SETS = {data.NEW_SENTENCES: splits.new, data.IN_DISTRIBUTION: splits.test}
tico = sources.find_local_file("TICO19_PATH", "tico19-fr-en/tico19-test.fr-en.tsv")
if tico is not None:
    TEST_SETS["out of domain: TICO-19 (medical)"] = sources.load_path(tico)[0]
elif not QUICK:
    try:
        TEST_SETS["out of domain: newstest2014 (news)"] = testsets.load_public("wmt14")[0]
    except Exception as err:  # offline: say so, score the two Tatoeba sets
        print(f"no out-of-domain set: {err}")
cap = {"tatoeba": 100, "out of domain": 40} if QUICK else {"tatoeba": EVAL_SENTENCES, "out of domain": EVAL_SENTENCES}
TEST_SETS = {
    name: test[: cap["out of domain" if name.startswith("out of domain") else "tatoeba"]]
    for name, test in TEST_SETS.items()
}
for name, test in TEST_SETS.items():
    desc = testsets.describe_test_set(test, words)
    print(f"{name}: {len(test):,} pairs, median {desc['median_words']} words, "
          f"{desc['share_unseen_word']:.0%} with a word unseen in training")  # fmt: skip

# %% [markdown]
# ## 2. Our scratch model
#
# Notebook 03's checkpoint is the model; we score it again here, with the same function and settings as the
# others, rather than copy its numbers. If the checkpoint is not there, we say so and train the `cpu` preset
# (the `tiny` one in quick mode) briefly on the same pairs: its row in the table is then labelled as such.

# %%
scratch_found = scratch_run.find_scratch_model(found, DEVICE, QUICK, progress=not QUICK)  # or a stand-in, trained here
scratch, SCRATCH_MINUTES, SCRATCH_TOKENS = scratch_found.run, scratch_found.minutes, scratch_found.tokens
SCRATCH_NAME, OURS = ("ours, scratch", "our model")
if scratch_found.stand_in:
    SCRATCH_NAME, OURS = "ours, scratch (stand-in)", "our stand-in model"
print(scratch_found.note)
for name, path in run_folder.RunFolder(scratch.path).test_sets.items():  # what `train` wrote there, when it did
    if path.is_file():
        written = [tuple(line.split("\t")) for line in path.read_text().splitlines()]
        assert written == data.test_sets_of(splits)[name], (
            f"{path.name} in {scratch.path} is not this notebook's {name}"
        )
        print(f"✓ {path.name} of the scratch run holds this notebook's {name} test set ({len(written):,} pairs)")

# %% [markdown]
# ## 3. Teaching a pretrained language model our format
#
# Our model reads `<bos> French <sep> English <eos>` and learns to write the English. A pretrained decoder-only
# model can be taught exactly the same task, with two differences. It has its own `<bos>` and `<eos>` tokens
# (for SmolLM2, `<|im_start|>` and `<|im_end|>` in the instruct version, `<|endoftext|>` in the base one), and
# it has **no separator token**; instead of adding one (a new embedding that starts random), we separate with
# text it can already read: `"French: … \nEnglish:"`. That choice also lets the *untrained* model attempt the
# task when shown a few examples.
#
# As in notebook 03 the **loss covers the English and the `<eos>` only**. Otherwise part of the training signal
# would go to predicting French, a task nobody asked for, and the model would spend capacity on it. SmolLM2's base tokenizer has no padding token, so
# `<eos>` pads too; the model still learns to stop, because the labels are built before padding: each
# example's own `<eos>` is a label, and only the pads added after it are -100.
#
# ### Exercise 4.1 · The prompt and labels of our format (3 points)
#
# Write `lm_example(tokenizer, fr, en)`: one training pair as SmolLM2 reads it, `{"input_ids": [...], "labels":
# [...]}`, two lists of equal length. As text the pair is `<bos>`, then `"French: " + fr + "\nEnglish: " + en`,
# then `<eos>`. How to cut it into ids and labels is yours to work out:
#
# - **Where the model starts writing.** At translation time the model is given a prompt and writes the rest, so
#   the ids it trains on must begin with exactly the ids it will be given then, and everything after them is what
#   it learns to write. Where does the prompt end, and on which side of that cut does the space before the
#   English belong? (Tokenizers of this family glue a space to the word after it: `" I"` is one piece and `"I"`
#   another.) Must `"French: "`, the sentence and `"\nEnglish:"` be tokenized as one text or one by one?
# - **Which labels, for Hugging Face.** A Hugging Face causal LM takes `labels` aligned with `input_ids` and shifts
#   them itself: the logits at position t are scored against `labels[t + 1]`, and -100 is left out. Notebook 03
#   shifted its labels by hand (Exercise 3.2); decide which positions hold -100 here, and what the others hold.
#
# The check builds pairs with a character-level tokenizer (one id per character), then, with a tiny LM of its own,
# asks that your ids begin with what translation gives that model (`lm.prompt_ids(fr)`), computes the loss the
# model takes from your labels and compares it with the cross-entropy of the English and the
# `<eos>` computed by hand from the logits, and compares your examples with
# `helpers.hf.translator.HFTranslator.encode_pair`, the package's version, on 50 pairs. The cell under it prints
# your labels beside the pieces.


# %%
def lm_example(tokenizer, fr: str, en: str) -> dict:
    """One pair as a Hugging Face causal LM trains on it: {"input_ids": [...], "labels": [...]} (see above)."""
    ids = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    # BEGIN SOLUTION
    prompt = bos + ids("French: " + fr + "\nEnglish:")  # one string: the pieces of "French: Je" as in any text
    target = ids(" " + en) + [tokenizer.eos_token_id]
    return {"input_ids": prompt + target, "labels": [-100] * len(prompt) + target}
    # END SOLUTION


# %% [markdown]
# The models. In quick mode they are tiny and random (two layers, hidden size 32), built from configurations
# with a tokenizer trained on our pairs, saved to a folder and loaded back the way a downloaded model is. In
# full mode they are downloaded from the Hugging Face hub (or found in its cache). `load_pretrained` says what
# to do when a name cannot be found (a typo, or no network): a local folder or a GGUF file works too.

# %%
if QUICK:
    stand_ins = Path(tempfile.mkdtemp(prefix="04_models-"))
    SEQ2SEQ_MODEL = str(tiny.tiny_marian(splits.train, stand_ins / "tiny-marian", seed=SEED))
    CAUSAL_MODEL = str(tiny.tiny_causal_lm(splits.train, stand_ins / "tiny-llama", seed=SEED))
marian = loading.load_pretrained(SEQ2SEQ_MODEL, device=DEVICE)
lm = loading.load_pretrained(CAUSAL_MODEL, device=DEVICE)
for t in (marian, lm):
    print(t.describe(), *(f"\n   note: {n}" for n in t.notes))

# %% [markdown]
# The check. First pairs by hand with one id per character, the text coming from the package's `PromptFormat`:
# `("Je lis.", "I read.")` and a pair drawn by the check. Then a tiny random LM that the check builds itself
# (`helpers.hf.tiny`, as quick mode's stand-in: a byte-level BPE tokenizer trained on 500 pairs of the built-in
# corpus drawn from its seed): the loss it computes from your labels, against the cross-entropy of the tokens
# after the prompt (`prompt_ids(fr)`: what translation gives the model) computed by hand from its logits; then the
# package's `encode_pair` on 50 of those pairs.


# %% tags=["check"]
def char_tokenizer():
    """One id per character, <bos> = 1, <eos> = 2: a tokenizer no package function was given."""

    class CharTokenizer:
        bos_token_id, eos_token_id = 1, 2

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [ord(c) for c in text]}

    return CharTokenizer()


def first_difference(got, want):
    return next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))


def check_lm(seed):
    """A tiny random causal LM the check builds itself (helpers.hf.tiny), its byte-level BPE tokenizer trained on 500
    pairs of the built-in corpus drawn from `seed`; and those pairs. The global random state is left as it was."""
    pairs = sources.builtin_corpus(n=500, seed=seed)
    with torch.random.fork_rng(), tempfile.TemporaryDirectory(prefix="04_check-lm-") as folder:
        return loading.load_pretrained(tiny.tiny_causal_lm(pairs, folder, seed=seed)), pairs


def as_example(example):
    """An example as plain lists of ints (anything that is not a dict: its repr, for the message)."""
    if not isinstance(example, dict):
        return repr(example)[:200]
    return {str(key): [int(i) for i in ids] for key, ids in example.items()}


def probe_format(example_fn, seed=0):
    """Runs your function with one id per character (the fixed pair and the last pair drawn from `seed`), then with
    the tokenizer of the LM the check builds from `seed`, on 50 of its pairs."""
    lm, pairs = check_lm(seed)
    by_hand = [as_example(example_fn(char_tokenizer(), fr, en)) for fr, en in [("Je lis.", "I read."), pairs[-1]]]
    return {"by_hand": by_hand, "pairs": [as_example(example_fn(lm.tokenizer, fr, en)) for fr, en in pairs[:50]]}


# %% tags=["check"]
def verify_format(values, seed=0):
    """By hand with one id per character (the input ids); then the loss the check's LM takes from your labels
    against the cross-entropy after the prompt; then the package's encode_pair."""
    lm, pairs = check_lm(seed)
    FORMAT = PromptFormat()  # the package's text of a pair, as written above
    for (fr, en), by_hand in zip([("Je lis.", "I read."), pairs[-1]], values["by_hand"], strict=True):
        want_ids = [1] + [ord(c) for c in FORMAT.text(fr, en)] + [2]
        keys = sorted(by_hand) if isinstance(by_hand, dict) else by_hand
        assert keys == ["input_ids", "labels"], f"return {{'input_ids': [...], 'labels': [...]}}, not {keys}"
        k = first_difference(by_hand["input_ids"], want_ids)
        assert by_hand["input_ids"] == want_ids, (
            f"with one id per character, the input_ids of {(fr, en)!r} are not <bos>, the text of the pair, <eos>: "
            f"they differ from position {k} on"
        )
        assert len(by_hand["labels"]) == len(want_ids), (
            f"with one id per character, {(fr, en)!r} has {len(want_ids)} input ids and {len(by_hand['labels'])} labels"
        )
    example, given = values["pairs"][0], lm.prompt_ids(pairs[0][0])  # what the model is given to translate
    assert isinstance(example, dict), f"return {{'input_ids': [...], 'labels': [...]}}, not {example}"
    n_given, k = len(given), first_difference(example["input_ids"], given)
    assert example["input_ids"][:n_given] == given, (
        f"the input_ids of {pairs[0]!r} do not begin with the {n_given} ids the model is given when it translates "
        f"(lm.prompt_ids(fr)): they differ from position {k} on. Where does the prompt end, and how is it cut into ids?"
    )
    with torch.no_grad():
        lm.model.eval()
        ids = torch.tensor([example["input_ids"]])
        out = lm.model(input_ids=ids, labels=torch.tensor([example["labels"]]))
        log_p = torch.log_softmax(out.logits[0].float(), dim=-1)  # (T, V): position t's guess at token t + 1
        hand = -torch.stack([log_p[t - 1, ids[0, t]] for t in range(n_given, ids.shape[1])]).mean()
    assert abs(out.loss.item() - hand.item()) < 1e-4 * max(1.0, hand.item()), (
        f"the loss the model takes from your labels ({out.loss.item():.5f}) is not the mean cross-entropy of the "
        f"tokens after the prompt, each given what precedes it ({hand.item():.5f}): where does the model start "
        "writing, and does Hugging Face shift the labels for you?"
    )
    for pair, got in zip(pairs[:50], values["pairs"], strict=True):
        assert got == lm.encode_pair(*pair), f"the notebook's format and helpers.hf.translator's disagree on {pair}"


verify_format(probe_format(lm_example))
example = lm_example(lm.tokenizer, *splits.train[0])  # one pair of our own in SmolLM2's format, shown below
print("✓ ids and labels as the package builds them; the loss is on what the model writes at translation time")

# %% [markdown]
# One training pair of your `lm_example` in SmolLM2's format, token by token: each input piece, and the label your
# function put beside it (a piece, or -100).

# %%
pieces = lm.tokenizer.convert_ids_to_tokens(example["input_ids"])
label_pieces = [
    repr(lm.tokenizer.convert_ids_to_tokens(label)) if label >= 0 else "-100" for label in example["labels"]
]
print(f"{len(pieces)} input ids, {len(label_pieces)} labels")
for t, (piece, label) in enumerate(zip(pieces, label_pieces)):
    print(f"{t:>3}  {piece!r:<16} {label}")

# %% [markdown]
# ### Exercise 4.2 · A batch whose padding the loss never sees (2 points)
#
# Fine-tuning reads examples in batches, and examples differ in length: the shorter ones are padded on the
# right to the longest one. A batch is three tensors, each `(batch, longest)` and of integers:
#
# - `input_ids`: the example's ids, then `pad_id` up to the width;
# - `attention_mask`: 1 on the example's own tokens, 0 on the pads (attention must not read them);
# - `labels`: the example's labels, then -100 (the loss must not score them).
#
# The trap: SmolLM2 pads with `<eos>`, so a rule like "labels = -100 wherever `input_ids == pad_id`" also
# deletes each example's own `<eos>` label, and the model never learns to stop. Build the labels from the
# examples' own labels; the padding alone gets -100.


# %%
def pad_batch(examples: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad examples {"input_ids": [...], "labels": [...]} (each list as long as its input_ids) into a batch.

    Returns {"input_ids", "attention_mask", "labels"}, each a (len(examples), longest) torch.long tensor:
    pad_id / 0 / -100 on the padding.
    """
    # BEGIN SOLUTION
    width = max(len(e["input_ids"]) for e in examples)
    batch = {
        "input_ids": torch.full((len(examples), width), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros((len(examples), width), dtype=torch.long),
        "labels": torch.full((len(examples), width), -100, dtype=torch.long),
    }
    for i, e in enumerate(examples):
        n = len(e["input_ids"])
        batch["input_ids"][i, :n] = torch.tensor(e["input_ids"])
        batch["attention_mask"][i, :n] = 1
        batch["labels"][i, :n] = torch.tensor(e["labels"])
    return batch
    # END SOLUTION


# %% [markdown]
# The check builds a batch by hand where `<eos>` (id 2) also pads, then asks a tiny LM (the one the check of
# Exercise 4.1 builds, with examples of pairs drawn from its seed) a property any right collator must have: the
# loss of the padded batch is the loss of each example alone, averaged over the target tokens of all of them.
# Padding must change nothing. Last, each row of the three tensors: the example's own entries, then the padding.


# %% tags=["check"]
def planted_examples():
    """Two examples by hand, where <eos> (id 2) also pads. Their labels are made up (a collator carries whatever labels
    it is given; which positions hold what is Exercise 4.1's question); the last one is 2, the <eos> label."""
    return [{"input_ids": [5, 6, 7, 2], "labels": [40, 41, 42, 2]}, {"input_ids": [5, 8, 2], "labels": [43, 44, 2]}]


def batch_examples(seed):
    """The LM the check builds from `seed` (<eos> pads) and four of its examples: the pairs with the shortest and the
    longest text, and two drawn from `seed`."""
    lm, pairs = check_lm(seed)
    by_length = sorted(pairs, key=lambda pair: len(pair[0] + pair[1]))
    drawn = np.random.default_rng(seed).choice(len(pairs), size=2, replace=False)
    return lm, [lm.encode_pair(*pair) for pair in [by_length[0], by_length[-1], *(pairs[i] for i in drawn)]]


def as_batch(batch):
    return {str(key): t for key, t in batch.items()} if isinstance(batch, dict) else repr(batch)[:200]


def probe_batch(pad_fn, seed=0):
    """Runs your function on the examples by hand, and on the check LM's examples together."""
    lm, examples = batch_examples(seed)
    return {
        "planted": as_batch(pad_fn(planted_examples(), pad_id=2)),
        "together": as_batch(pad_fn(examples, pad_id=lm.pad_id)),
    }


# %% tags=["check"]
def verify_batch(values, seed=0):
    """The batch by hand entry by entry; then the check LM's loss of the padded batch against the examples' own."""
    batch = values["planted"]
    keys = sorted(batch) if isinstance(batch, dict) else batch
    assert keys == ["attention_mask", "input_ids", "labels"], f"the batch has keys {keys}"
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.long and t.shape == (2, 4) for t in batch.values()), (
        "each tensor: (number of examples, longest example), dtype torch.long"
    )
    assert batch["input_ids"].tolist() == [[5, 6, 7, 2], [5, 8, 2, 2]], (
        f"input_ids {batch['input_ids'].tolist()}: the example's ids first, then pad_id on the right"
    )
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]], (
        f"attention_mask {batch['attention_mask'].tolist()}: 1 on the example's own tokens (its <eos> too), 0 on pads"
    )
    assert batch["labels"].tolist() == [[40, 41, 42, 2], [43, 44, 2, -100]], (
        f"labels {batch['labels'].tolist()}: the example's own labels (its <eos> label 2 kept, although 2 also pads), "
        "then -100 on the padding"
    )
    lm, examples = batch_examples(seed)
    width, batch = max(len(e["input_ids"]) for e in examples), values["together"]
    assert isinstance(batch, dict) and sorted(batch) == keys, f"the batch has keys {batch}"
    assert all(
        isinstance(t, torch.Tensor) and t.dtype == torch.long and t.shape == (len(examples), width)
        for t in batch.values()
    ), f"each tensor: (number of examples, longest example) = {(len(examples), width)}, dtype torch.long"
    with torch.no_grad():
        lm.model.eval()
        together = lm.model(**batch).loss.item()
        alone = [lm.model(**{k: torch.tensor([e[k]]) for k in ("input_ids", "labels")}).loss.item() for e in examples]
    n_targets = [sum(label != -100 for label in e["labels"][1:]) for e in examples]  # the model shifts labels by one
    expected = sum(loss * n for loss, n in zip(alone, n_targets, strict=True)) / sum(n_targets)
    assert abs(together - expected) < 1e-3 * max(1.0, expected), (
        f"the padded batch's loss {together:.5f} differs from the examples' own losses {expected:.5f}: "
        "the padding is being scored (labels) or read (attention_mask)"
    )
    for i, e in enumerate(examples):  # each row: the example, then the padding alone
        n, pads = len(e["input_ids"]), width - len(e["input_ids"])
        for key, own, pad in (("input_ids", e["input_ids"], lm.pad_id), ("attention_mask", [1] * n, 0),
                              ("labels", e["labels"], -100)):  # fmt: skip
            assert batch[key][i].tolist() == own + [pad] * pads, (
                f"{key}, row {i}: the example's own {n} entries, then {pad} on the {pads} padded positions"
            )


verify_batch(probe_batch(pad_batch))
batch = pad_batch([lm_example(lm.tokenizer, *pair) for pair in splits.train[:4]], pad_id=lm.pad_id)
padding = 1 - batch["attention_mask"].float().mean().item()
print(f"a batch of 4 of our pairs, width {batch['input_ids'].shape[1]}: {padding:.0%} of it is padding, which "
      "neither attention nor the loss sees")  # fmt: skip

# %% [markdown]
# ## 4. Before fine-tuning: opus-mt as it is, SmolLM2 with three examples
#
# opus-mt is already a French→English translator. SmolLM2 was never trained to translate; a **few-shot
# prompt** shows it three pairs from our training split in the format above and lets it continue after the
# fourth `English:`. Decoding stops at `<eos>` or at the end of the line. Every model goes through the same
# `evaluate_pairs` as our own: here on the new-sentence set, greedy.

# %%
few_shot = lm.with_examples(splits.train[1:4])
before = {}
for label, model in (("opus-mt as it is", marian), ("SmolLM2 3-shot", few_shot)):
    ev, _ = evaluate.evaluate_pairs(model, TEST_SETS[data.NEW_SENTENCES], test_set=data.NEW_SENTENCES, words=words)
    before[label] = ev
    print(f"{label:>18}: BLEU {ev['bleu']:5.2f}  chrF {ev['chrf']:5.2f}  ({ev['sentences_per_s']} sentences/s)")
print("\n3-shot prompt as the model sees it:\n" + textwrap.indent(few_shot.tokenizer.decode(
    few_shot.prompt_ids(splits.new[0][0])), "   | "))  # fmt: skip

# %% [markdown]
# ## 5. Fine-tuning
#
# With `transformers.Trainer`, as chapter 7 of the Hugging Face course fine-tunes a translator: for opus-mt
# `Seq2SeqTrainingArguments`, a `Seq2SeqTrainer` and `DataCollatorForSeq2Seq` (which pads the French with the
# tokenizer's pad token and the English labels with -100); for SmolLM2 `TrainingArguments` and `Trainer`, fed
# with our examples and padded by our collate of section 3, so that the loss is on the English only.
# `finetune.build_trainer` builds them; in essence, for opus-mt:
#
# ```python
# args = Seq2SeqTrainingArguments(output_dir=out / "trainer", per_device_train_batch_size=32, learning_rate=5e-5,
#                                 lr_scheduler_type="constant_with_warmup", warmup_steps=20, max_grad_norm=1.0,
#                                 fp16=True, save_total_limit=1, logging_steps=10, seed=SEED, data_seed=SEED)
# trainer = Seq2SeqTrainer(model=marian.model, args=args, train_dataset=examples, processing_class=marian.tokenizer,
#                          data_collator=DataCollatorForSeq2Seq(marian.tokenizer, model=marian.model),
#                          callbacks=[finetune.TimeBudget(minutes=15), finetune.MonitorBLEU(...)])
# trainer.train(resume_from_checkpoint=...)  # None on a first run; after a disconnect, the last checkpoint
# ```
#
# Trainer brings AdamW with a short warm-up, gradient clipping, fp16 with a gradient scaler on a T4 (bf16 on newer
# GPUs, fp32 on a CPU), checkpoints and a resume that continues with the same batches. Three things it lacks
# come from `helpers.hf.finetune`: a **time budget** (Trainer counts steps; `TimeBudget` stops after 15 minutes of
# training, earlier sessions included, and writes a checkpoint every 10 minutes), the **monitor** (`MonitorBLEU`
# translates a fixed set of validation pairs every few minutes and records BLEU: the curve of section 6; the clock
# stops while it scores and while it saves), and a **stop on a NaN loss** before the update that would write it
# into the weights (Trainer would apply it). `finetune.finish` then saves the model where `load_pretrained` reads it.
#
# > Words met here. **fp16 / bf16**: 16-bit number formats; fp16 keeps precision but overflows above 65,504,
# > bf16 keeps fp32's range with less precision (a T4 has fast fp16 only). **Gradient scaler**: multiplies the
# > loss before the backward pass so that small fp16 gradients do not round to zero, divides them back before
# > the update, and skips an update whose gradients overflowed. **GGUF**: a single-file format for
# > (often quantised: **Q4_1** stores about 4.5 bits per weight) models, which `load_pretrained` turns back
# > into fp32 weights that can be trained.
#
# Two learning rates: 5e-5 for opus-mt, which already translates and should move little, and 1e-4 for
# SmolLM2, which must learn the task. Neither was tuned on a test set. For a model whose full fine-tuning does
# not fit the GPU, `FinetuneConfig(lora=True)` trains low-rank adapters only (`peft`).

# %%
RUNS = Path(tempfile.mkdtemp(prefix="04_runs-")) if QUICK else (DRIVE or runtime.repo_root() or Path.cwd()) / "runs"
data_for_run = {"source": DATA, "limit": LIMIT, "columns": COLUMNS, "seed": SEED}
finetuned, results = {}, {}
for kind, base in (("seq2seq", marian), ("causal", lm)):
    out = RUNS / f"04_finetune-{kind}"
    cfg = finetune.FinetuneConfig(batch_size=BATCH_SIZE, seed=SEED, lr=3e-3 if QUICK else None)  # tiny models: large lr
    print(f"fine-tuning {base.describe()} into {out}")
    trainer = finetune.build_trainer(base, splits.train, out, minutes=MINUTES[kind], steps=STEPS[kind], cfg=cfg,
                               data=data_for_run, monitor=splits.valid[:MONITOR_PAIRS],
                               monitor_every_minutes=0.05 if QUICK else MINUTES[kind] / 6)  # fmt: skip
    a = trainer.args
    print(f"  {type(trainer).__name__} (a {type(trainer).__bases__[-1].__name__}) with {type(a).__name__}: lr "
          f"{a.learning_rate:g}, batch "
          f"{a.per_device_train_batch_size}, fp16 {a.fp16}, bf16 {a.bf16}, callbacks "
          f"{[type(c).__name__ for c in trainer.callback_handler.callbacks]}")  # fmt: skip
    trainer.train(resume_from_checkpoint=trainer.run.checkpoint)
    results[kind] = r = finetune.finish(trainer)  # the last BLEU point; the model saved to out/checkpoint
    finetuned[kind] = base
    print(f"  {r.steps} steps, {r.pairs:,} pairs, {r.tokens:,} target tokens, {format_minutes(r.seconds / 60)}, "
          f"{r.precision}, {r.trainable:,} of {r.parameters:,} parameters trained; last loss {r.loss}")  # fmt: skip

# %% [markdown]
# The folder is the model: `load_pretrained(out)` (and `python -m helpers evaluate --checkpoint out`) reads it
# back; the reloaded model must translate exactly as the one in memory.

# %%
for kind, translator in finetuned.items():
    again = loading.load_pretrained(RUNS / f"04_finetune-{kind}", device=DEVICE)
    some = [fr for fr, _ in splits.valid[:8]]
    assert again.translate(some) == translator.translate(some), f"{kind}: the saved model translates differently"
print("✓ both fine-tuned folders reload to the same translations")

# %% [markdown]
# **On several GPUs.** Trainer runs under `torchrun` as it is (PyTorch's `DistributedDataParallel`, set up by
# accelerate): `torchrun --nproc_per_node N -m helpers finetune …` starts one process per GPU, each takes its share
# of every batch (the batch per step stays `--batch-size`), process 0's clock stops all of them at the same step, and
# only process 0 scores, saves and writes `finetune.json` (`helpers.training.distributed`; a test runs it with two
# CPU processes). The cell runs opus-mt's fine-tuning that way when this machine has more than one GPU, else says why
# not and what to type where there are.

# %%
from helpers.training import distributed

N_GPUS, SKIP = distributed.several_gpus(QUICK)
several_args = ["finetune", "--model", SEQ2SEQ_MODEL, "--data", DATA, "--minutes", f"{MINUTES['seq2seq']:g}",
                "--seed", str(SEED), "--batch-size", str(BATCH_SIZE),
                "--out", str(RUNS / f"04_finetune-seq2seq-{max(N_GPUS, 2)}gpus")]  # fmt: skip
several_args += ["--limit", str(LIMIT)] if LIMIT else []
several_args += ["--columns", ",".join(COLUMNS)] if COLUMNS else []
if distributed.launch_or_say_why(N_GPUS, SKIP, several_args):  # the command to type; then run here, or why not
    done = finetune.load_finetuned_info(several_args[several_args.index("--out") + 1])["result"]
    print(f"{N_GPUS} GPUs: {done['steps']:,} steps, {done['pairs']:,} pairs in {done['minutes']:.1f} min; one GPU "
          f"above: {results['seq2seq'].steps:,} steps, {results['seq2seq'].pairs:,} pairs")  # fmt: skip

# %% [markdown]
# ## 6. The comparison
#
# Every model, every test set, greedy and beam 4, through `evaluate_pairs`. The table puts the costs beside
# the scores. This is the cell that takes longest (not yet timed on a T4; on a CPU, many minutes). Our model
# reads at most `max_len` tokens, source and translation together; a pretrained model reads 200 source tokens:
# the line after the table counts the sources each model had to cut, which matters on long news sentences.

# %%
CONTESTANTS = {  # every model behind the one translator interface: translate(sources, beams)
    SCRATCH_NAME: translation.ScratchTranslator(scratch.model, scratch.tokenizer),
    "opus-mt as it is": loading.load_pretrained(SEQ2SEQ_MODEL, device=DEVICE),
    "opus-mt fine-tuned": finetuned["seq2seq"],
    "SmolLM2 3-shot": loading.load_pretrained(CAUSAL_MODEL, device=DEVICE).with_examples(splits.train[1:4]),
    "SmolLM2 fine-tuned": finetuned["causal"],
}
evaluations, hypotheses = {}, {}
for label, model in CONTESTANTS.items():
    for name, test in TEST_SETS.items():
        for beams in (1, BEAMS):
            ev, hyps = evaluate.evaluate_pairs(model, test, test_set=name, words=words, beams=beams)
            evaluations[label, name, beams] = ev
            if beams == 1:
                hypotheses[label, name] = hyps
    print(f"scored {label}")

# %% [markdown]
# One row per model: its size, what it trained on our pairs, and its scores on each test set.


# %%
def params_of(label):
    if label == SCRATCH_NAME:  # every weight trained on our pairs
        n = sum(p.numel() for p in scratch.model.parameters())
        return n, n
    kind = "seq2seq" if "opus" in label else "causal"
    trained = results[kind].trainable if "fine-tuned" in label else 0
    return CONTESTANTS[label].parameters(), trained


def training_of(label):
    if label == SCRATCH_NAME:
        return {"minutes": SCRATCH_MINUTES, "tokens": SCRATCH_TOKENS}
    if "fine-tuned" in label:
        r = results["seq2seq" if "opus" in label else "causal"]
        return {"minutes": r.seconds / 60, "tokens": r.tokens}
    return {"minutes": 0.0, "tokens": 0}


rows = []
for label in CONTESTANTS:
    total, trained = params_of(label)
    row = {"model": label, "parameters": total, "trained": trained, **training_of(label)}
    for name in TEST_SETS:
        g, b = evaluations[label, name, 1], evaluations[label, name, BEAMS]
        unseen = {r["slice"]: r for r in g["slices"]["unseen_word"]}.get("with an unseen word")
        row[name] = {"bleu_greedy": g["bleu"], "bleu_beam": b["bleu"], "chrf_greedy": g["chrf"],
                     "chrf_beam": b["chrf"], "sentences_per_s": g["sentences_per_s"],
                     "bleu_unseen_word": unseen["bleu"] if unseen else None}  # fmt: skip
    rows.append(row)

# %%
short = {data.NEW_SENTENCES: "new", data.IN_DISTRIBUTION: "in-dist"}
header = (
    f"{'model':<44} {'params':>8} {'trained':>8} {'time':>7} "
    + " ".join(f"{short.get(n, 'out-of-dom'):>17}" for n in TEST_SETS)
    + "  unseen-word  sent/s"
)
print(header + "\n" + " " * 71 + "   BLEU g/b  chrF" * len(TEST_SETS))
for row in rows:
    cells = " ".join(
        f"{row[n]['bleu_greedy']:6.1f}/{row[n]['bleu_beam']:4.1f} {row[n]['chrf_greedy']:5.1f}" for n in TEST_SETS
    )
    new = row[data.NEW_SENTENCES]
    unseen = "-" if new["bleu_unseen_word"] is None else f"{new['bleu_unseen_word']:.1f}"
    print(f"{row['model'][:44]:<44} {row['parameters'] / 1e6:7.2f}M {row['trained'] / 1e6:7.2f}M "
          f"{format_minutes(row['minutes'] or 0):>7} {cells}  {unseen:>11}  {new['sentences_per_s']:6.1f}")  # fmt: skip
print("sources cut to fit:", "; ".join(f"{label[:20]}: " + ", ".join(str(evaluations[label, n, 1]["truncated"])
      for n in TEST_SETS) for label in CONTESTANTS))  # fmt: skip
print(f"sacreBLEU: {evaluations[SCRATCH_NAME, data.NEW_SENTENCES, 1]['bleu_signature']}")
for name, model_id in (("opus-mt", SEQ2SEQ_MODEL), ("SmolLM2", CAUSAL_MODEL), ("ours", None)):
    card = loading.CARDS.get(model_id, "random weights (quick mode)" if QUICK else "see its model card") if model_id else (
        "nothing: trained from random weights on our pairs only")  # fmt: skip
    print(f"pretrained on, {name}: {card}")
if QUICK:
    print(
        "QUICK MODE: the two Hugging Face rows are tiny RANDOM models, not pretrained ones: the numbers test the code."
    )
print("time: minutes of training on our pairs (fine-tuning only for the pretrained models; 0 s: not trained here)")

# %% [markdown]
# **Which model wins on each test set, and by how much?** One bar per model, greedy decoding, one panel per
# test set, the copy-the-source baseline as a dashed line.

# %%
names = list(TEST_SETS)
fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), sharey=True)
axes = np.atleast_1d(axes)
colors = plt.cm.tab10(np.arange(len(CONTESTANTS)))
for ax, name in zip(axes, names):
    scores = [evaluations[label, name, 1]["bleu"] for label in CONTESTANTS]
    ax.bar(range(len(scores)), scores, color=colors)
    ax.axhline(evaluations[SCRATCH_NAME, name, 1]["copy_baseline"]["bleu"], ls="--", c="grey", lw=1)
    ax.set_title(textwrap.fill(name, 32), fontsize=9)
    ax.set_xticks(range(len(scores)), [textwrap.fill(label, 14) for label in CONTESTANTS], fontsize=6, rotation=60)
    for k, s in enumerate(scores):
        ax.text(k, s, f"{s:.1f}", ha="center", va="bottom", fontsize=7)
axes[0].set_ylabel("BLEU (greedy)")
fig.suptitle("BLEU by test set (dashed: copy the source)" + (" — QUICK MODE, tiny random HF models" if QUICK else ""))
fig.tight_layout()
save_figure(
    fig,
    "04_bleu_by_test_set",
    question="Which model wins on each test set, and by how much?",
    caption="BLEU (greedy) of every model on each test set, one panel per set; the dashed line copies the source."
    + (" Quick mode: tiny random stand-ins, for the code path only." if QUICK else ""),
    numbers={f"{label}, {name}": evaluations[label, name, 1]["bleu"] for label in CONTESTANTS for name in names},
)
plt.show()

# %% [markdown]
# **How fast does each pretrained model learn our task, and when does it pass our model?** BLEU on the fixed
# validation pairs against minutes of fine-tuning (the clock stopped while scoring). The first point is the
# model before any fine-tuning, without a prompt (it has never seen the format). The dashed line is our scratch
# model on the same pairs, after all of its training. The sentences under the figure are written from its numbers.

# %%
fig, ax = plt.subplots(figsize=(6, 3.8))
curve_names = (
    {"seq2seq": "tiny random Marian", "causal": "tiny random Llama"}
    if QUICK
    else {"seq2seq": "opus-mt", "causal": "SmolLM2"}
)
for kind, label in curve_names.items():
    mon = results[kind].monitor
    ax.plot([m["minutes"] for m in mon], [m["bleu"] for m in mon], "o-", label=f"{label} ({results[kind].precision})")
monitor = splits.valid[:MONITOR_PAIRS]
ours_on_monitor = evaluate.score(translation.translate(scratch.model, scratch.tokenizer, [fr for fr, _ in monitor]),
                          [en for _, en in monitor])["bleu"]  # fmt: skip
ax.axhline(ours_on_monitor, ls="--", c="grey", label=f"{SCRATCH_NAME} ({format_minutes(SCRATCH_MINUTES)} of training)")
ax.set_xlabel("minutes of fine-tuning")
ax.set_ylabel(f"BLEU, {MONITOR_PAIRS} validation pairs, greedy")
ax.set_title(f"Learning our task, on {runtime.hardware_name(DEVICE)}" + (" — QUICK MODE" if QUICK else ""))
ax.legend()
fig.tight_layout()
save_figure(
    fig,
    "04_bleu_vs_minutes",
    question="How fast does each pretrained model learn our task, and when does it pass our model?",
    caption=f"BLEU on {MONITOR_PAIRS} fixed validation pairs (greedy) against minutes of fine-tuning, on "
    f"{runtime.hardware_name(DEVICE)}; the dashed line is our scratch model after all of its training.",
    numbers={f"{label} at the end": results[kind].monitor[-1]["bleu"] for kind, label in curve_names.items()}
    | {"scratch model": ours_on_monitor},
)
plt.show()

# %% [markdown]
# What the curves say, written from their numbers (a sentence flips when the numbers do):


# %%
def passing_sentence(name: str, monitor: list[dict], ours: float, ours_name: str) -> str:
    """When a fine-tuning curve ({"minutes", "bleu"} points, the first before any training) passes our BLEU."""
    first, last = monitor[0], monitor[-1]
    passed = next((m for m in monitor if m["bleu"] > ours), None)
    head = f"{name}: BLEU {first['bleu']:.1f} before fine-tuning, {last['bleu']:.1f} after "
    head += format_minutes(last["minutes"])
    if passed is None:
        return f"{head}; it stays below {ours_name} ({ours:.1f}) all along."
    if passed is first:
        return f"{head}; it is above {ours_name} ({ours:.1f}) before any fine-tuning."
    return f"{head}; it passes {ours_name} ({ours:.1f}) after {format_minutes(passed['minutes'])} of fine-tuning."


for kind, label in curve_names.items():
    print(passing_sentence(label, results[kind].monitor, ours_on_monitor, OURS))
if QUICK:
    print(QUICK_NOTE)

# %% [markdown]
# ### Exercise 4.3 · Is the difference real? A paired bootstrap (3 points)
#
# Two systems a BLEU point or two apart on a few hundred sentences may owe the gap to luck: another test set
# drawn the same way could order them the other way. The **paired bootstrap** (Koehn, 2004) measures how often
# that happens. Draw a new test set of the same size from ours, *with replacement* (some sentences twice, some
# not at all), score both systems on it, and repeat; the fraction of these resamples in which system B is
# **not** ahead of system A is the p-value of "B is better than A". Three things matter:
#
# - **Paired**: both systems are scored on *the same* resampled sentences (the same indices). Sentences differ
#   in difficulty far more than two systems differ; drawing them apart for each system adds that variation to
#   the difference and hides a real one.
# - **Corpus BLEU on each resample**, from summed counts. BLEU is not an average of sentence scores: each
#   sentence contributes its counts (hypothesis and reference length, matching and total n-grams for n = 1 to 4),
#   and a resample's BLEU is computed from their sum. `sentence_stats` below gives the counts, one row per
#   sentence, and `bleu_from_stats` the BLEU of a summed row (both from sacreBLEU: the numbers of its corpus score).
# - **A tie is not a win**: a resample where B is only level with A is no evidence for B, so count `<= 0`.
#   Then two identical systems get p = 1, and a system ahead on every sentence gets p = 0.

# %%
from sacrebleu.metrics import BLEU  # noqa: E402

_bleu_counts = BLEU(effective_order=True)  # effective order changes sentence *scores* only; we keep the counts


def sentence_stats(hyps: list[str], refs: list[str]) -> np.ndarray:
    """(n, 10) integers, a row per sentence: output length, reference length, matching 1-4-grams, all 1-4-grams."""
    rows = []
    for hyp, ref in zip(hyps, refs, strict=True):
        s = _bleu_counts.sentence_score(hyp, [ref])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.array(rows, dtype=np.int64).reshape(-1, 10)


def bleu_from_stats(total) -> float:
    """Corpus BLEU from one row of summed counts, as sacreBLEU's corpus_score computes it (its default smoothing)."""
    t = [int(x) for x in total]
    return BLEU.compute_bleu(t[2:6], t[6:10], t[0], t[1], smooth_method="exp").score


def paired_bootstrap(stats_a, stats_b, score=bleu_from_stats, n_samples: int = 1000, seed: int = 0) -> dict:
    """Paired bootstrap of score(B) - score(A) over the sentences of one test set.

    stats_a, stats_b: (n, k) arrays, row i the counts of sentence i for system A and for system B (the same
    sentences, in the same order); score: a row of summed counts (k,) -> a number (corpus BLEU by default).
    Returns {"difference": score(B) - score(A) on the whole set,
             "p_value": the fraction of resamples in which B is not ahead of A (difference <= 0),
             "interval": (2.5th, 97.5th percentile) of the resampled differences, as a tuple of floats}.
    seed: every random draw comes from it, so that the same call gives the same result.
    """
    # BEGIN SOLUTION
    stats_a, stats_b = np.asarray(stats_a), np.asarray(stats_b)
    n = len(stats_a)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_samples, n))  # the same sentences for A and B
    diffs = np.array([score(stats_b[i].sum(axis=0)) - score(stats_a[i].sum(axis=0)) for i in idx])
    low, high = np.percentile(diffs, [2.5, 97.5])
    return {
        "difference": score(stats_b.sum(axis=0)) - score(stats_a.sum(axis=0)),
        "p_value": float(np.mean(diffs <= 0)),  # a tie is no evidence for B
        "interval": (float(low), float(high)),
    }
    # END SOLUTION


# %% [markdown]
# The check: first the two cases whose answer is known without any computation (with a simpler score, the
# fraction of words right: counts `(right, words)` per sentence), on a fixed system and on one drawn from the
# check's seed, then a saved case: two systems of 60 sentences whose outputs share most of their errors, against
# a reference implementation run with 2,000 resamples (`data/reference/04_paired_bootstrap.json`). Another seed,
# or another way of drawing the indices, moves the p-value by up to 0.03 (the tolerance); a test that is not paired
# moves it by about 0.25. Last, two systems drawn from the check's seed, run with 4,000 resamples, against a paired
# bootstrap of the same sentences (here your own function; when the notebook is graded, the course's).


# %% tags=["check"]
def right_fraction(t):
    """The score of the known cases: the fraction of words right, from summed counts (right, words)."""
    return t[0] / t[1]


def word_counts(seed):
    """System A's counts (right, words), a row per sentence, and the bootstrap seed each is run with: 50 sentences of
    10 words (numpy seed 1; the function's default seed), then a system drawn from `seed` (run with `seed`)."""
    fixed, rng = np.random.default_rng(1), np.random.default_rng(seed)
    n = int(rng.integers(20, 80))
    words = rng.integers(8, 16, size=n)
    drawn = np.stack([rng.integers(0, words), words], axis=1)  # fewer right than words: B can be one word ahead
    return [(np.stack([fixed.integers(0, 8, size=50), np.full(50, 10)], axis=1), None), (drawn, seed)]


def paired_systems(seed):
    """Two systems' counts (right, words) on the same 40 to 80 sentences drawn from `seed`: B gets one word more right
    than A in about 30 % of them and one fewer in two fewer sentences, so that neither the sign of the whole
    difference nor a p of 0 or 1 answers; and the bootstrap seed to run them with."""
    rng = np.random.default_rng(seed + 1)
    n = int(rng.integers(40, 81))
    words = rng.integers(8, 16, size=n)
    a = np.stack([rng.integers(1, words - 1), words], axis=1)
    more = round(0.3 * n)
    change = rng.permutation(np.r_[np.ones(more), -np.ones(more - 2), np.zeros(n - 2 * more + 2)]).astype(np.int64)
    return a, a + np.stack([change, np.zeros(n, dtype=np.int64)], axis=1), int(rng.integers(0, 2**31))


def plain(value):
    """A solution's result as plain values: numpy numbers as numbers, arrays and tuples as lists."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def probe_bootstrap(bootstrap_fn, stats_fn, bleu_fn, seed=0):
    """Runs your function on the known cases (two identical systems; B one word ahead in every sentence), fixed and
    drawn from `seed`, on two systems drawn from `seed`, then on the saved case with sentence_stats' counts (with its
    saved seed)."""
    cases = []
    for sys_a, boot_seed in word_counts(seed):
        given = {} if boot_seed is None else {"seed": boot_seed}
        same = bootstrap_fn(sys_a, sys_a, score=right_fraction, n_samples=200, **given)
        ahead = bootstrap_fn(sys_a, sys_a + [1, 0], score=right_fraction, n_samples=200, **given)
        cases.append({"same": plain(same), "ahead": plain(ahead)})
    sys_a, sys_b, boot_seed = paired_systems(seed)
    drawn = bootstrap_fn(sys_a, sys_b, score=right_fraction, n_samples=4000, seed=boot_seed)
    saved = runtime.reference_outputs("04_paired_bootstrap.json")
    stats_a, stats_b = stats_fn(saved["hyps_a"], saved["refs"]), stats_fn(saved["hyps_b"], saved["refs"])
    got = bootstrap_fn(stats_a, stats_b, n_samples=saved["n_samples"], seed=saved["seed"])
    return {"cases": cases, "drawn": plain(drawn), "bleu_a": plain(bleu_fn(stats_a.sum(axis=0))), "saved": plain(got)}


# %% tags=["check"]
def verify_bootstrap(values, seed=0):
    """The known cases exactly; the saved case within the tolerances a reference measured over other seeds; the
    drawn systems against paired_bootstrap on the same sentences."""
    for (sys_a, _), case in zip(word_counts(seed), values["cases"], strict=True):
        same, ahead = case["same"], case["ahead"]
        assert same["difference"] == 0 and same["p_value"] == 1.0, (
            f"two identical systems must get p = 1 (scored on the same resampled sentences, they tie every time); "
            f"got {same}. Are both systems resampled with the same indices, and is a tie counted as 'B not ahead' "
            "(<= 0)?"
        )
        want = right_fraction((sys_a + [1, 0]).sum(axis=0)) - right_fraction(sys_a.sum(axis=0))
        assert abs(ahead["difference"] - want) < 1e-9 and ahead["p_value"] == 0.0, (
            f"B one word ahead in every sentence must get difference {want:.4g} and p = 0; got {ahead}. Is it B minus "
            "A, and are both systems resampled with the same sentences?"
        )
    saved, got = runtime.reference_outputs("04_paired_bootstrap.json"), values["saved"]
    assert abs(values["bleu_a"] - saved["bleu_a"]) < 1e-6, "sentence_stats or bleu_from_stats changed"
    assert abs(got["difference"] - saved["difference"]) < 1e-6, (
        f"difference {got['difference']:.3f}, expected {saved['difference']:.3f}: corpus BLEU of B minus that of A, "
        "each from the summed counts of all sentences (not an average of sentence scores)"
    )
    assert abs(got["p_value"] - saved["p_value"]) < saved["p_tolerance"], (
        f"p-value {got['p_value']:.3f}, expected {saved['p_value']:.3f} ± {saved['p_tolerance']}: resample n "
        "sentences with replacement, the same indices for both systems, and count the resamples where B - A <= 0"
    )
    low, high = got["interval"]
    assert np.isfinite([low, high]).all(), f"the interval ({low}, {high}) must be two finite numbers"
    assert max(abs(low - saved["interval"][0]), abs(high - saved["interval"][1])) < saved["interval_tolerance"], (
        f"interval ({low:.2f}, {high:.2f}), expected ({saved['interval'][0]:.2f}, {saved['interval'][1]:.2f}) ± "
        f"{saved['interval_tolerance']}: the 2.5th and 97.5th percentiles of the resampled differences B - A"
    )
    # systems drawn from the seed, against paired_bootstrap (in the grader, the course's; here, yours): a saved answer
    # cannot stand in, and another way of drawing the indices moves p by about 0.01 (4,000 resamples)
    sys_a, sys_b, boot_seed = paired_systems(seed)
    want, got = paired_bootstrap(sys_a, sys_b, score=right_fraction, n_samples=4000, seed=boot_seed), values["drawn"]
    assert got["interval"][1] > got["interval"][0], (
        f"systems drawn from the check's seed: the interval {tuple(got['interval'])} has no width, where the "
        "differences B - A of 4,000 resampled test sets vary from one resample to the next"
    )
    width = want["interval"][1] - want["interval"][0]
    assert abs(got["p_value"] - want["p_value"]) < 0.05 and all(
        abs(g - w) < 0.1 * width for g, w in zip(got["interval"], want["interval"], strict=True)
    ), (
        "systems drawn from the check's seed: p = {:.3f}, interval ({:.4f}, {:.4f}), where a paired bootstrap of the "
        "same sentences gives p = {:.3f} ± 0.05 and ({:.4f}, {:.4f}) ± {:.4f}".format(
            got["p_value"], *got["interval"], want["p_value"], *want["interval"], 0.1 * width
        )
    )


verify_bootstrap(probe_bootstrap(paired_bootstrap, sentence_stats, bleu_from_stats))
saved = load_reference("04_paired_bootstrap.json")
got = paired_bootstrap(*(sentence_stats(saved[h], saved["refs"]) for h in ("hyps_a", "hyps_b")), seed=saved["seed"],
                       n_samples=saved["n_samples"])  # fmt: skip
print(f"saved case: B - A = {got['difference']:+.2f} BLEU, p = {got['p_value']:.3f} (reference "
      f"{saved['p_value']:.3f}), 95 % of resamples in ({got['interval'][0]:+.2f}, {got['interval'][1]:+.2f})")  # fmt: skip

# %% [markdown]
# Now on our run: is each fine-tuned model's difference from our model on the new sentences more than the luck of
# this test set? The counts give back the BLEU `evaluate_pairs` reported, so this is the same scoring.


# %%
def bootstrap_sentence(a: str, b: str, result: dict, alpha: float = 0.05) -> str:
    """What a paired bootstrap of B against A says, worded from its numbers."""
    d, p, (low, high) = result["difference"], result["p_value"], result["interval"]
    head = f"{b} against {a}: {d:+.1f} BLEU (95 % of resamples between {low:+.1f} and {high:+.1f}), p = {p:.3f}"
    if d <= 0:
        return f"{head}: {b} is not ahead on this test set."
    if p < alpha:
        return f"{head}: {a} was level or ahead in under {alpha:.0%} of resamples, so the lead is unlikely to be luck."
    return f"{head}: {a} was level or ahead in {p:.0%} of resamples, so this test set does not resolve the difference."


new_refs = [en for _, en in TEST_SETS[data.NEW_SENTENCES]]
counts = {label: sentence_stats(hypotheses[label, data.NEW_SENTENCES], new_refs) for label in CONTESTANTS}
for label in CONTESTANTS:
    reported = evaluations[label, data.NEW_SENTENCES, 1]["bleu"]
    assert abs(bleu_from_stats(counts[label].sum(axis=0)) - reported) < 0.01, f"{label}: counts disagree with BLEU"
significance = {}
for label in ("opus-mt fine-tuned", "SmolLM2 fine-tuned"):
    a, b = sorted((SCRATCH_NAME, label), key=lambda name: bleu_from_stats(counts[name].sum(axis=0)))
    significance[label] = {"a": a, "b": b, **paired_bootstrap(counts[a], counts[b], seed=SEED)}
    print(bootstrap_sentence(OURS if a == SCRATCH_NAME else a, OURS if b == SCRATCH_NAME else b, significance[label]))
if QUICK:
    print(QUICK_NOTE)

# %% [markdown]
# ## 7. Where the models disagree
#
# Scores summarise; sentences show. **On which sentences do the models disagree most, and what do those
# sentences have in common?** Below, the new-sentence pairs whose outputs differ most (chrF of the best
# output minus that of the worst), side by side with the reference and the words our training pairs lack.

# %%
from sacrebleu.metrics import CHRF  # noqa: E402

chrf = CHRF()
new = TEST_SETS[data.NEW_SENTENCES]
shown = ["opus-mt fine-tuned", "SmolLM2 fine-tuned", SCRATCH_NAME]


def sentence_chrf(hyp, ref):
    return chrf.sentence_score(hyp, [ref]).score


spread = []
for i, (_, en) in enumerate(new):
    s = [sentence_chrf(hypotheses[label, data.NEW_SENTENCES][i], en) for label in shown]
    spread.append((max(s) - min(s), i))
for _, i in sorted(spread, reverse=True)[:6]:
    fr, en = new[i]
    print(f"FR   {fr}\nREF  {en}")
    for label in shown:
        print(f"     {label[:24]:<24} {hypotheses[label, data.NEW_SENTENCES][i]}")
    unseen = words.unseen(fr)
    print(f"     (words unseen in training: {', '.join(unseen) if unseen else 'none'})\n")

# %% [markdown]
# **On a sentence of your own.** The table above is chosen by the test set; type your own below (in a live notebook)
# and every model translates it, one row each, with the time it took: what pretraining buys, on your sentence.
# The fixed sentence is drawn and saved for the report.

# %%
from helpers.course.plotting import text_box  # noqa: E402
from helpers.evaluation.explain import draw_side_by_side, side_by_side  # noqa: E402

MY_SENTENCE = new[0][0] if QUICK else "Je ne sais pas si elle viendra demain matin."
ROWS_OF = {label: CONTESTANTS[label] for label in (SCRATCH_NAME, "opus-mt fine-tuned", "SmolLM2 fine-tuned")}


def show_side_by_side(text):
    rows = side_by_side(ROWS_OF, text, beams=1)
    for r in rows:
        print(f"{r['model']:<28} {r['seconds'] * 1000:6.0f} ms  {r['translation']}")
    fig = draw_side_by_side(text, rows)
    plt.show()
    return rows, fig


mine, fig = show_side_by_side(MY_SENTENCE)
save_figure(fig, "04_your_sentence", question="What does each model make of one sentence, and how fast?",
            caption=f"Greedy translations of “{MY_SENTENCE}” by our scratch model and the two fine-tuned models, with "
            "the time each took on " + runtime.hardware_name(DEVICE) + "." + (QUICK_NOTE if QUICK else ""),
            numbers={f"ms, {r['model']}": round(r["seconds"] * 1000, 1) for r in mine})  # fmt: skip
box = text_box(show_side_by_side, MY_SENTENCE)  # live kernels only

# %% [markdown]
# ## 8. What pretraining buys, and what it costs
#
# **Where does each model score, by slice?** The new sentences split in two: those holding a French word that
# no pair of *our* training data holds, and those whose words were all seen in training. Beside each fine-tuned
# model, its difference from ours on each slice.


# %%
by_slice = {}
for label in CONTESTANTS:
    rows_unseen = {r["slice"]: r for r in evaluations[label, data.NEW_SENTENCES, 1]["slices"]["unseen_word"]}
    a, b = rows_unseen.get("with an unseen word"), rows_unseen.get("all words seen in training")
    if a and b:
        by_slice[label] = {"unseen": a["bleu"], "seen": b["bleu"]}
        print(f"{label[:44]:<44} unseen word: BLEU {a['bleu']:5.1f} (n={a['n']})   "
              f"all seen: {b['bleu']:5.1f} (n={b['n']})")  # fmt: skip
for label in ("opus-mt fine-tuned", "SmolLM2 fine-tuned"):
    if label in by_slice and SCRATCH_NAME in by_slice:
        gaps = {k: by_slice[label][k] - by_slice[SCRATCH_NAME][k] for k in ("unseen", "seen")}
        print(
            f"{label} minus {OURS}: {gaps['unseen']:+.1f} BLEU with an unseen word, {gaps['seen']:+.1f} on the others"
        )
if QUICK:
    print(QUICK_NOTE)

# %% [markdown]
# **What does each model receive when a word is unseen?** Our tokenizer cuts a word it never saw into known
# pieces; SmolLM2's tokenizer cuts it with a vocabulary learned from far more text (in quick mode, from our
# pairs too). Below, both cuts of the unseen words of a few new sentences, and what each model wrote.

# %%
with_unseen = [(i, fr, en) for i, (fr, en) in enumerate(new) if words.unseen(fr)][:4]
for i, fr, en in with_unseen:
    for w in words.unseen(fr)[:2]:
        print(f"unseen {w!r}: our tokenizer -> {scratch.tokenizer.pieces(w)}, "
              f"SmolLM2's -> {lm.tokenizer.tokenize(' ' + w)}")  # fmt: skip
    print(f"  FR  {fr}\n  REF {en}")
    for label in shown:
        print(f"  {label[:24]:<24} {hypotheses[label, data.NEW_SENTENCES][i]}")
    print()

# %% [markdown]
# ### Exercise 4.4 · Fluent and wrong: flag dropped and invented numbers and names (2 points)
#
# Some outputs read well and say something the French does not. Two kinds can be flagged automatically, and you
# write the rule:
#
# - a number or name **dropped**: in the source and in the reference, missing from the output;
# - a number or name **invented**: in the output, in neither the source nor the reference.
#
# Checkable tokens are numbers (digits, with an optional decimal part), and names, crudely: capitalised words
# that do not start a sentence. A word starts a sentence when nothing but spaces and opening quotes (`"`, `'`,
# `«`, `“`) comes before it, or when what comes before, those left aside, ends in `.`, `!`, `?`, `:` or `;`. The
# pattern `TOKEN` finds the candidates; your rule keeps the right ones. The check is crude (a capitalised *Monday* counts as a name), so
# read the examples it prints.

# %%
TOKEN = re.compile(r"\b(?:\d+(?:[.,]\d+)?|[A-ZÀ-Ý][a-zà-ÿ]+)\b")


def checkable_tokens(text: str) -> set[str]:
    """The numbers of `text` (wherever they stand), and its capitalised words that do not start a sentence."""
    # BEGIN SOLUTION
    found = set()
    for m in TOKEN.finditer(text):
        before = text[: m.start()].rstrip(" \"'«“")
        starts_sentence = not before or before[-1] in ".!?:;"
        if m.group()[0].isdigit() or not starts_sentence:
            found.add(m.group())
    return found
    # END SOLUTION


def flag_fluent_but_wrong(test: list[tuple[str, str]], hyps: list[str]) -> tuple[list, list]:
    """(dropped, invented): a tuple (fr, en, hyp, sorted tokens) for each output that drops a checkable token
    its source and its reference both hold, and one for each output holding tokens in neither of them."""
    dropped, invented = [], []
    for (fr, en), hyp in zip(test, hyps, strict=True):
        src, ref, out = checkable_tokens(fr), checkable_tokens(en), checkable_tokens(hyp)
        # BEGIN SOLUTION
        lost = (src & ref) - out
        made_up = out - ref - src
        # END SOLUTION
        if lost:
            dropped.append((fr, en, hyp, sorted(lost)))
        if made_up:
            invented.append((fr, en, hyp, sorted(made_up)))
    return dropped, invented


# %% [markdown]
# The check plants one case per rule: a changed number, a dropped name, a name copied from the source that the
# reference replaces by a pronoun, a number the reference writes in words, a second sentence's first word, a
# number that starts a sentence, and a quoted first word. Then texts and triples drawn from its seed, built so that
# what they hold is known: names and numbers inside sentences, first words after `.`, `!`, `?`, `:` or `;` and
# opening quotes, and each name or number of a triple in the source, the reference or the output, or several.


# %% tags=["check"]
def token_cases(seed):
    """(text, the tokens to find, why): the fixed texts, then texts drawn from `seed` whose sentences start with a
    capitalised word, a name or a number (after an opening quote or not) and go on with words, names and numbers."""
    cases = [
        (
            "Tom met Marie in Paris in 2019.",
            ["2019", "Marie", "Paris"],
            "'Tom' starts the sentence; the others are kept",
        ),
        ("He left. She stayed 3.5 days.", ["3.5"], "'She' starts the second sentence; 3.5 is one number"),
        ("20 people came.", ["20"], "a number counts even at the start of a sentence"),
        ('"Come!" he said.', [], "a first word after an opening quote still starts a sentence"),
    ]
    rng = np.random.default_rng(seed)
    names, numbers = ["Marie", "Paris", "Tom", "Émilie", "Londres", "Québec"], ["3", "20", "3.5", "1,5", "2019"]
    words = ["il", "a", "vu", "the", "and", "avec", "went", "to", "près", "de", "said"]
    for _ in range(6):
        kept, sentences = set(), []
        for _ in range(int(rng.integers(1, 4))):
            first = str(rng.choice(["Il", "Elle", "She", "Hier", *names, *numbers]))
            rest = [str(rng.choice(words + names + numbers)) for _ in range(int(rng.integers(1, 6)))]
            kept |= {w for w in rest if w in names + numbers} | ({first} & set(numbers))
            quote = str(rng.choice(["", '"', "« ", "“", "'"]))
            sentences.append(quote + " ".join([first, *rest]) + str(rng.choice(list(".!?:;"))))
        cases.append((" ".join(sentences), sorted(kept), "a name inside a sentence, or a number anywhere"))
    return cases


def flag_cases(seed):
    """(what, [(fr, en, hyp)], expected dropped, expected invented), the lists as [fr, sorted tokens]: the planted
    cases, then triples drawn from `seed` in which each name or number has a role (where it appears)."""
    planted = [
        ("Tom a 97 ans.", "Tom is 97.", "Tom is 19."),  # 97 dropped, 19 invented
        ("Je parle à Marie.", "I speak to Marie.", "I speak to her."),  # Marie dropped
        ("Je parle à Marie.", "I speak to her.", "I speak to Marie."),  # copied from the source: fine
        ("Il a 3 chiens.", "He has three dogs.", "He has three dogs."),  # the reference has no 3: fine
        ("Il dort. Elle lit.", "He sleeps. She reads.", "He sleeps. She reads."),  # sentence starts: fine
        ("20 personnes sont venues.", "20 people came.", "Twenty people came."),  # 20 dropped
        ("« Viens ! » dit-il.", '"Come!" he said.', '"Go!" he said.'),  # a quoted first word: fine
    ]
    dropped = [["Tom a 97 ans.", ["97"]], ["Je parle à Marie.", ["Marie"]], ["20 personnes sont venues.", ["20"]]]
    groups = [("planted", planted, dropped, [["Tom a 97 ans.", ["19"]]])]
    rng = np.random.default_rng(seed + 1)
    where = {"all three": "seo", "dropped": "se", "invented": "o", "copied": "so", "source": "s", "reference": "e",
             "reference and output": "eo"}  # fmt: skip
    triples, dropped, invented = [], [], []
    for _ in range(10):
        tokens = rng.choice(["Marie", "Paris", "Émilie", "Québec", "3", "20", "3.5", "2019"], size=3, replace=False)
        role = {str(t): str(rng.choice(list(where))) for t in tokens[: int(rng.integers(0, 4))]}
        side = {s: [t for t, r in role.items() if s in where[r]] for s in "seo"}
        fr, en, hyp = (
            " ".join([lead, *side[s]]) + "." for lead, s in (("Il a vu", "s"), ("He saw", "e"), ("He saw", "o"))
        )
        triples.append((fr, en, hyp))
        dropped += [[fr, sorted(t for t, r in role.items() if r == "dropped")]] if "dropped" in role.values() else []
        invented += [[fr, sorted(t for t, r in role.items() if r == "invented")]] if "invented" in role.values() else []
    return [*groups, ("drawn", triples, dropped, invented)]


# %% tags=["check"]
def as_tokens(found):
    return sorted(str(t) for t in found) if isinstance(found, set | frozenset) else f"not a set: {found!r}"[:200]


def probe_fluent(tokens_fn, flag_fn, seed=0):
    """Runs your functions on the texts and the triples, fixed and drawn from `seed`."""
    flags = []
    for _, triples, *_ in flag_cases(seed):
        dropped, invented = flag_fn([(fr, en) for fr, en, _ in triples], [hyp for _, _, hyp in triples])
        flags.append([[[str(d[0]), [str(t) for t in d[3]]] for d in found] for found in (dropped, invented)])
    return {"tokens": [as_tokens(tokens_fn(text)) for text, *_ in token_cases(seed)], "flags": flags}


def verify_fluent(values, seed=0):
    """Each text's tokens, then what each group of triples drops and invents, against what was built in."""
    for (text, want, why), got in zip(token_cases(seed), values["tokens"], strict=True):
        assert got == want, f"checkable_tokens({text!r}) gave {got}, expected {want}: {why}"
    for (what, _, want_dropped, want_invented), (dropped, invented) in zip(
        flag_cases(seed), values["flags"], strict=True
    ):
        assert dropped == want_dropped, (
            f"{what} cases, dropped: {dropped}; expected {want_dropped}: a token of source AND reference, missing "
            "from the output"
        )
        assert invented == want_invented, (
            f"{what} cases, invented: {invented}; expected {want_invented}: a token of the output found in neither "
            "the source nor the reference"
        )


verify_fluent(probe_fluent(checkable_tokens, flag_fluent_but_wrong))
print("✓ the planted cases and the drawn ones: every token found, every drop and invention flagged, nothing else")

# %% [markdown]
# Your checker on every model's outputs, every test set (greedy), with a few of the inventions to read.


# %%
risks = {}
for label in shown:
    for name, test in TEST_SETS.items():
        d, v = flag_fluent_but_wrong(test, hypotheses[label, name])
        risks[label, name] = {"dropped": len(d), "invented": len(v), "n": len(test),
                              "examples_dropped": d[:3], "examples_invented": v[:3]}  # fmt: skip
        print(f"{label[:24]:<24} {name[:34]:<34} dropped a number/name: {len(d):4d}   "
              f"invented one: {len(v):4d}  of {len(test)}")  # fmt: skip
for label in shown[:2]:
    for name in TEST_SETS:
        for fr, en, hyp, what in risks[label, name]["examples_invented"][:2]:
            print(f"\n[{label}, {name}] invented {what}\n  FR  {fr}\n  REF {en}\n  OUT {hyp}")
if QUICK:
    print(QUICK_NOTE)

# %% [markdown]
# ### Questions: what pretraining buys, and what it costs
#
# Answer from the numbers of a full run: quick mode's random stand-ins say nothing about pretraining.

# %% [markdown] tags=["question"]
# **Question 4.1 (3 points).** What does pretraining buy? Compare each fine-tuned pretrained model with ours on the new
# sentences that hold a word unseen in our training pairs, on those whose words were all seen, and by source
# length. Where is the pretrained model's advantage largest, where does it lose, and why would pretraining give
# an advantage exactly there?

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: BLEU of every model by source length on the new sentences.
for label in CONTESTANTS:
    lengths = {r["slice"]: r["bleu"] for r in evaluations[label, data.NEW_SENTENCES, 1]["slices"]["length"]}
    print(f"{label[:30]:<30}", "  ".join(f"{k} words: {v:5.1f}" for k, v in lengths.items()))

# %% [markdown] tags=["answer"]
# **Model answer.** Measured on two CPU cores (`benchmarks/RESULTS.md`: SmolLM2-135M-*Instruct* from a 4-bit GGUF
# file turned back into fp32 weights, fine-tuned for 15 minutes, against our `cpu` preset trained for 15 minutes,
# before the preset was given Muon, WSD, ReLU² and 8,000 pieces; the same new-sentence set, greedy, one run
# each). SmolLM2 scored BLEU 27.7 against our 26.4 overall (sacreBLEU's paired bootstrap there: p = 0.008), **18.7
# against 12.2 on sentences with a word unseen in our training pairs** (+6.5), 20.5 against 12.0 on sentences of
# 16-25 words (+8.5), but **29.0 against 35.2 on sentences of 1-5 words** (-6.2).
#
# Why there. Our model learned French from about 150,000 short sentences; a word outside them is, for it, a
# sequence of sub-word pieces it never saw in context, and a long sentence is a context longer than most it
# trained on. A pretrained model met most words of the language (opus-mt: millions of translated sentences;
# SmolLM2: trillions of tokens, mostly English, some French) and long, varied sentences before it saw our pairs;
# fine-tuning only has to teach it the format. It loses on the short, common sentences our model saw many times
# over: SmolLM2 fine-tuned on 3,424 pairs (2.3 % of one pass), while ours made more than one full pass over all
# 146,816. So pretraining buys coverage of what our data lacks (rare words, long sentences), not better use of
# what our data has.


# %% tags=["answer"]
def unseen_word_sentence(name: str, theirs: dict, ours: dict, ours_name: str) -> str:
    """Compare one model with ours on the two slices; theirs/ours: {"unseen": BLEU, "seen": BLEU}."""
    gaps = {k: theirs[k] - ours[k] for k in ("unseen", "seen")}

    def gap(k):
        if gaps[k] == 0:
            return f"level with {ours_name}"
        return f"{abs(gaps[k]):.1f} BLEU {'above' if gaps[k] > 0 else 'below'} {ours_name}"

    head = f"{name}: {gap('unseen')} on new sentences with an unseen word, {gap('seen')} on the others"
    if gaps["unseen"] > gaps["seen"]:
        return f"{head}: the gap moves {gaps['unseen'] - gaps['seen']:.1f} BLEU in its favour where a word is unseen."
    return f"{head}: the unseen words do not move the gap in its favour ({gaps['unseen'] - gaps['seen']:+.1f} BLEU)."


for label in ("opus-mt fine-tuned", "SmolLM2 fine-tuned"):
    if label in by_slice and SCRATCH_NAME in by_slice:
        print(unseen_word_sentence(label, by_slice[label], by_slice[SCRATCH_NAME], OURS))

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 4.1 (3 points).**
# - **3 points:** with numbers of a full run: the pretrained model's advantage is largest on sentences with a word
#   unseen in our pairs and on long sentences, and it loses (or gains least) on short, common ones; why:
#   pretraining gave it coverage of words (a word our pairs lack it has most likely met it elsewhere) and long
#   contexts our 150,000 short pairs lack, while our model saw the short, common sentences many times over (fine-
#   tuning covered a small share of one pass).
# - **2 points:** the right slices with numbers, but no reason or a vague one ("it is bigger").
# - **1 point:** the overall scores only, or the slices without numbers.
# - **0 points:** says pretraining helps evenly everywhere, or that the parameter count alone explains it.
#
# *Key phrases:* "coverage", "met it elsewhere", "many times over"

# %% [markdown] tags=["question"]
# **Question 4.2 (3 points).** What does pretraining cost? From your checker's counts and the examples it prints, say how
# often each model invents or drops a number or a name, and how its errors read. Then give two distinct reasons
# why a fluent, wrong translation does more harm in a translator people use than a visibly broken one.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: what the checker flagged for one model on the new sentences.
for fr, en, hyp, what in risks["SmolLM2 fine-tuned", data.NEW_SENTENCES]["examples_dropped"]:
    print(f"dropped {what}\n  FR  {fr}\n  REF {en}\n  OUT {hyp}")

# %% [markdown] tags=["answer"]
# **Model answer.** Measured on two CPU cores (`benchmarks/RESULTS.md`, the run of Question 4.1, 3,337 new
# sentences): SmolLM2 fine-tuned **invented** a number or a name in 61 outputs (ours: 45) and **dropped** one in
# 19 (ours: 71), and its inventions read well: *Tom est mort à l'âge de nonante-sept ans* became "Tom died at
# the age of 19."; *J'ai envie d'apprendre l'hébreu* became "I want to learn the Irish."; *tourmenté par des
# flashbacks et des cauchemars* became "visited by flashbacks and car accidents". Ours fails more visibly on words
# it never saw (*Facebook est ennuyant*: "Faknning is in Snaking."), though not always (*Je suis de Singapour*:
# "I'm in Stove."): fluent and wrong happens to ours too, less often, and ours drops names silently more often.
#
# Two reasons fluent errors do more harm:
#
# 1. **The reader cannot see the error.** A fluent sentence with a wrong number, a changed name or an added
#    clause reads exactly like a correct one, and the person who asked for a translation does not read French,
#    so nothing warns them. A broken sentence is noticed and checked; a dosage, a date or a name that changes
#    silently (the out-of-domain medical set is full of them) does harm a garbled sentence would not.
# 2. **The content may come from pretraining, not from the source.** A language model completes text with what
#    is likely; when the French holds a rare word, it may write a frequent word that fits the context instead,
#    or continue past the end of the source. The output then reflects its pretraining data, with that data's
#    biases and gaps, and nothing in it says which words were translated and which were made up.


# %% tags=["answer"]
def risk_sentence(name: str, theirs: dict, ours: dict, ours_name: str) -> str:
    """Compare the counts of flagged outputs; theirs/ours: {"dropped", "invented", "n"}."""

    def compare(k):
        x, y = theirs[k], ours[k]
        return "more than" if x > y else "fewer than" if x < y else "as many as"

    return (
        f"{name} invented a number or name in {theirs['invented']} of {theirs['n']} outputs, {compare('invented')} "
        f"{ours_name} ({ours['invented']}), and dropped one in {theirs['dropped']}, {compare('dropped')} "
        f"{ours_name} ({ours['dropped']})."
    )


ours_risks = risks[SCRATCH_NAME, data.NEW_SENTENCES]
for label in shown[:2]:
    print("new sentences:", risk_sentence(label, risks[label, data.NEW_SENTENCES], ours_risks, OURS))

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 4.2 (3 points).**
# - **3 points:** three parts, a point each. (i) This run's counts of invented and dropped numbers or names per
#   model, with an example of how each model's errors read (a fluent invention against a garbled word). (ii), (iii)
#   Two distinct, valid reasons why fluent wrong output does more harm. Any two distinct valid reasons earn these;
#   examples, not the only answers: the reader cannot see the error (a fluent wrong sentence reads like a right one
#   to someone who does not read French, whereas a reader notices broken output and checks it); the content may
#   come from pretraining, not from the source (a likely word for the context, with its data's biases); trust
#   carries over (users stop checking a system that usually reads well); the harm falls where errors are costly
#   and hard to check (names, dates, amounts, doses); a downstream program (a search, a summary) consumes the
#   output with no person reading it.
# - **2 points:** two of the three parts (two reasons that are one reason in other words count as one).
# - **1 point:** one of the three parts.
# - **0 points:** none of them, or fluent output said to be safer because it reads well.
#
# *Key phrases:* "cannot see the error", "not from the source", "a reader notices"

# %% [markdown] tags=["question"]
# **Question 4.3 (2 points).** What does each model do with a French word it never saw in our training pairs, and what
# is the risk of each strategy? Use the tokenizer pieces and outputs printed above (from a full run), and say which
# failures a reader would notice.

# %% [markdown] tags=["your-answer"]
# **Your answer.** *Write your answer here: what you found, with the numbers from the cell below.*

# %%
# Compute here what supports your answer. A start: how each tokenizer cuts a word, and each model's output for a
# sentence holding it (edit the sentence).
sentence = "Je suis de Singapour."
print("our pieces:", scratch.tokenizer.pieces("Singapour"), "| SmolLM2's:", lm.tokenizer.tokenize(" Singapour"))
for label in shown:
    print(f"{label[:24]:<24}", CONTESTANTS[label].translate([sentence])[0])

# %% [markdown] tags=["answer"]
# **Model answer.** Our model, meeting a word it never saw, has only the word's sub-word pieces, which it saw
# inside other words. It either **copies** them (often right for names and cognates: *Facebook*, and visibly odd
# when wrong: "Faknning") or **drops** the word quietly (71 names or numbers lost in the measured run of
# `benchmarks/RESULTS.md`). A pretrained LM has usually met the word, and when it has not, it prefers to
# **substitute** a fluent, frequent word that fits the context ("the Irish" for *l'hébreu*, "car accidents" for
# *cauchemars*): the output stays grammatical, so the error is hidden. The risk differs accordingly: copying
# tends to fail loudly, where a reader notices; substituting and dropping fail quietly, where nobody does, and the
# pretrained model substitutes more (61 inventions against our 45) while ours drops more (71 against 19).

# %% [markdown] tags=["answer", "rubric"]
# **Rubric · Question 4.3 (2 points).**
# - **2 points:** our model copies the pieces of a never-seen word (right for names and cognates, visibly odd when
#   wrong) or drops it; the pretrained LM has usually met the word, and when not it tends to substitute a fluent,
#   frequent word that fits the context; copying tends to fail loudly, substituting and dropping fail quietly;
#   with examples or counts.
# - **1 point:** one model's strategy, or both strategies without their risk.
# - **0 points:** says both models write an unknown token, or that the pretrained model always knows the word.
#
# *Key phrases:* "substitute", "fail loudly"

# %% [markdown]
# ## 9. For the report
#
# `reports/metrics/04_comparison.json` holds, per model, a record in the layout of every metrics file
# (`helpers.evaluation.evaluate.metrics_record`: the evaluations as `evaluate_pairs` returned them, with signatures,
# baselines, slices, speed and samples), plus the table above, the paired bootstrap of each fine-tuned model
# against ours on the new sentences, and the fluent-but-wrong counts.

# %%
records = []
for label in CONTESTANTS:
    total, trained = params_of(label)
    kind = "seq2seq" if "opus" in label else "causal"
    records.append(evaluate.metrics_record(
        model={"name": label, "parameters": total, "trained_parameters": trained,
               "pretrained_on": None if label == SCRATCH_NAME else loading.CARDS.get(
                   SEQ2SEQ_MODEL if kind == "seq2seq" else CAUSAL_MODEL, "see the model card"),
               "checkpoint": str(RUNS / f"04_finetune-{kind}") if "fine-tuned" in label else None},
        evaluations=[evaluations[label, name, beams] for name in TEST_SETS for beams in (1, BEAMS)],
        training=results[kind].summary() if "fine-tuned" in label else training_of(label),
    ))  # fmt: skip
comparison = {
    "schema": "tbb-comparison/1",
    "notebook": "04_pretrained_comparison",
    "quick": QUICK,
    "not_pretrained_note": "quick mode: the Hugging Face models are tiny random stand-ins" if QUICK else None,
    "data": {"source": DATA, "limit": LIMIT, "seed": SEED, "pairs": {k: len(v) for k, v in TEST_SETS.items()}},
    "table": rows,
    "fluent_but_wrong": {
        f"{label} | {name}": {k: v for k, v in r.items() if not k.startswith("examples")}
        for (label, name), r in risks.items()
    },  # fmt: skip
    "paired_bootstrap_new_sentences": significance,
    "models": records,
}
path = evaluate.write_json(comparison, runtime.metrics_dir() / "04_comparison.json")
print(f"wrote {path}")
assert all(len(r["evaluations"]) == 2 * len(TEST_SETS) for r in comparison["models"])

# %% [markdown]
# ## What we did, and what to try
#
# We taught two pretrained models our task on our pairs and scored them with the function that scored our own
# model, on the same sentences. Things to try:
#
# - **LoRA** (low-rank adapters: small matrices added beside the frozen weights, the only ones trained):
#   `finetune.FinetuneConfig(lora=True)` trains about 2 % of SmolLM2's parameters at rank 8. How much BLEU does it
#   lose in the same minutes, and how much memory does it save?
# - **A stronger small multilingual model**: `google/gemma-3-270m` (its own licence terms) scored about 32 BLEU
#   on newer Tatoeba sentences from a three-shot prompt in an earlier try recorded in the issue tracker (not
#   in `benchmarks/RESULTS.md`). It overflows in fp16, so `finetune` trains it in fp32 on a T4 (bf16 on newer GPUs).
# - **More shots**: does a 10-example prompt close the gap to fine-tuning, and what does it cost per sentence?
# - **Your own sentences**: `python -m helpers translate --checkpoint runs/04_finetune-causal` reads French
#   lines; find a sentence where the fine-tuned LM is fluent and wrong, and explain why.

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

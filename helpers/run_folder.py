"""A run folder: every file and folder a run writes, named once.

``train`` and ``finetune`` write into the folder given with ``--out``; ``translate`` and ``evaluate`` read it
back, and notebooks 03 and 04 keep theirs on Drive so that a reconnect resumes. Six modules write into it, so the
names live here and each module asks :class:`RunFolder` for its path::

    out/
      checkpoint.pt             train: weights, optimizer, RNG states, data position, config (training.checkpoint)
      checkpoint.json           train: the same step and configuration, readable by people
      tokenizer/                train: the tokenizer, written once before the first step (text.tokenizer)
        spm.model                 the SentencePiece model
        tokenizer.json            how it was made (vocabulary size asked for, type)
      pretrain/                 train with pretraining: the pretraining phase's own run folder (training.pretrain)
      train_words.tsv           train, finetune: the training split's French words (text.testsets.WordTable)
      test_new.tsv              train, finetune: the new-sentence test set, French<TAB>English (text.data)
      test.tsv                  train, finetune: the in-distribution test set
      train_summary.json        train: what was trained, on what, how fast (commands.train_command)
      eval_dev.greedy.hyp.txt   train: greedy translations of the newer development sentences, at the end
      eval.json                 evaluate: the scores (its --json, by default here)
      eval.test_new.hyp.txt     evaluate: the translations of each test set, beside the record
      size_curves.json          notebook 03: validation loss against time for each size (training.sizing)
      finetune.json             finetune: marks the folder; configuration, data and result (hf.finetune)
      checkpoint/               finetune: the final model and tokenizer (save_pretrained; hf.loading reads it)
      trainer/checkpoint-N/     finetune: Trainer's checkpoint to resume from; trainer_state.json is written last

Only the standard library: every layer above may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# train
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_INFO = "checkpoint.json"
TOKENIZER = "tokenizer"
TOKENIZER_MODEL = "spm.model"  # inside any folder a Tokenizer is saved to, the run's tokenizer/ among them
TOKENIZER_META = "tokenizer.json"
PRETRAIN = "pretrain"
TRAIN_SUMMARY = "train_summary.json"
DEV_HYPOTHESES = "eval_dev.greedy.hyp.txt"
# train and finetune: the data stage's files, so that evaluate scores every model on the same sentences
WORDS = "train_words.tsv"
NEW_SENTENCES = "new sentences (held out by rare word and length)"
IN_DISTRIBUTION = "in-distribution (random split)"
TEST_FILES = {NEW_SENTENCES: "test_new.tsv", IN_DISTRIBUTION: "test.tsv"}  # evaluate's order: new sentences first
# evaluate
EVAL_RECORD = "eval.json"
HYPOTHESES_SUFFIX = ".hyp.txt"
# notebook 03
CURVES = "size_curves.json"
# finetune
FINETUNE_INFO = "finetune.json"
HF_CHECKPOINT = "checkpoint"
TRAINER = "trainer"
TRAINER_STATE = "trainer_state.json"  # Trainer's name; it writes it last, so its presence marks a whole checkpoint


@dataclass(frozen=True)
class RunFolder:
    """The paths of one run folder (nothing is created or read here: the modules that write a file write it)."""

    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))  # a str is welcome; frozen, so set through object

    # -- train
    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT

    @property
    def checkpoint_info(self) -> Path:
        return self.path / CHECKPOINT_INFO

    @property
    def tokenizer(self) -> Path:
        return self.path / TOKENIZER

    @property
    def pretrain(self) -> Path:
        return self.path / PRETRAIN

    @property
    def train_summary(self) -> Path:
        return self.path / TRAIN_SUMMARY

    @property
    def dev_hypotheses(self) -> Path:
        return self.path / DEV_HYPOTHESES

    # -- train and finetune
    @property
    def words(self) -> Path:
        return self.path / WORDS

    @property
    def test_sets(self) -> dict[str, Path]:
        """The run's own two test sets, label -> file, new sentences first."""
        return {label: self.path / name for label, name in TEST_FILES.items()}

    # -- evaluate, notebook 03
    @property
    def eval_record(self) -> Path:
        return self.path / EVAL_RECORD

    @property
    def curves(self) -> Path:
        return self.path / CURVES

    # -- finetune
    @property
    def finetune_info(self) -> Path:
        return self.path / FINETUNE_INFO

    @property
    def hf_checkpoint(self) -> Path:
        return self.path / HF_CHECKPOINT

    @property
    def trainer(self) -> Path:
        return self.path / TRAINER


def hypotheses_beside(record: str | Path, test_file: str | Path) -> Path:
    """Where ``evaluate`` writes the translations of ``test_file`` (a path or a public set's name): beside its
    record, ``eval.json`` -> ``eval.test_new.hyp.txt``. The record may lie outside the run folder (``--json``)."""
    record = Path(record)
    return record.with_name(f"{record.stem}.{Path(str(test_file)).stem}{HYPOTHESES_SUFFIX}")

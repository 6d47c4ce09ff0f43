"""The stages of a run that compose lower modules, written once, and called by ``train``, ``finetune``,
notebooks 03-06 and the benchmarks. ``train`` (:func:`helpers.commands.train_command`) reads top to bottom, each
stage's module called once for what it does:

    resume = training.checkpoint.resume_point(out)          # decided once, first: what the folder continues
    prepared = text.data.prepare_data(data, cfg, out, reuse_tokenizer=resume.resumes)  # the data stage
    cfg, sizing = training.sizing.size_for_run(cfg, examples, vocab, resume.sized_by, dev)  # the cpu preset's size
    built = start_model(cfg, prepared, out, dev, resume=resume)  # weights, embeddings, pretraining
    result = training.train.train(built.model, batcher, valid, built.translate_cfg, out, resume_from=resume.translation)
    run = load_run(out)                             # the trained model (or a fine-tuned one) back, to translate

Notebook 03 teaches the same stages one cell each (a test holds its cells to these functions); ``finetune``
shares the data stage's first half (:func:`prepare_pairs`), so the same data, seed and limit give every model
the same test sets. Each stage prints what it did to ``stderr`` when ``progress`` is set.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import torch

from . import runtime
from .evaluation.translation import ScratchTranslator
from .hf import embedding_transfer, loading
from .nn.model import DecoderOnlyTransformer, ModelConfig
from .nn.variants import build_model, describe_variant, num_parameters
from .run_folder import FINETUNE_INFO, TOKENIZER, RunFolder
from .text.data import PreparedData, SplitData, batches_for, load_clean_split, test_sets_of, write_test_sets
from .text.sources import load_path
from .text.testsets import WordTable
from .text.tokenizer import Tokenizer
from .training import checkpoint as ckpt_lib
from .training.optim import describe_muon
from .training.pretrain import pretrain_phase, split_budget

# ----------------------------------------------------------------------------------------------
# the data stage (its whole is helpers.text.data.prepare_data)


def static_step(cfg) -> int | None:
    """How the training batches are padded for ``cfg``: to multiples of ``cfg.static_step`` tokens, a fixed set of
    shapes, when the step is compiled (``cfg.compile``: each shape compiles once, where bucketed batches would bring
    a new shape, and a new compilation, with almost every batch); None, as little padding as possible, otherwise."""
    return cfg.static_step if cfg.compile else None


def train_batches(tokenizer, splits, cfg, seed: int = 0) -> tuple:
    """:func:`helpers.text.data.batches_for` with ``cfg``'s batch settings: the training batcher, the validation
    batches and what encoding dropped (what :func:`helpers.text.data.prepare_data` makes, for a configuration that
    differs from the prepared data's, as in notebook 05's sweeps)."""
    return batches_for(
        tokenizer,
        splits,
        max_len=cfg.max_len,
        max_tokens=cfg.max_tokens,
        valid_sentences=cfg.valid_sentences,
        parallel_pairs=cfg.parallel_pairs,
        seed=seed,
        static_step=static_step(cfg),
    )


def prepare_pairs(
    data: str,
    out: str | Path,
    *,
    columns: tuple[str, ...] | None = None,
    seed: int = 0,
    limit: int | None = None,
    stderr: TextIO | None = None,
    write: bool = True,
) -> SplitData:
    """The data stage of a pretrained model, which brings its own tokenizer: the same load, clean and split
    as :func:`helpers.text.data.prepare_data` (hence the same test sets), the test sets and the training words written to ``out``
    (unless ``write`` is False: the ranks after the first under torchrun)."""
    stage = load_clean_split(data, columns, limit=limit, seed=seed)
    print(stage.describe(), file=stderr if stderr is not None else sys.stderr)
    if write:
        write_test_sets(test_sets_of(stage.splits), out)
        WordTable.from_pairs(stage.splits.train).save(RunFolder(out).words)
    return stage


# ----------------------------------------------------------------------------------------------
# the model stage


@dataclass
class Built:
    model: DecoderOnlyTransformer
    translate_cfg: object  # the TrainConfig of the translation phase (the budget left after pretraining)
    transfer: object = None  # what set the embeddings (init_embeddings' report, or what ``start`` returned)
    pretrained: object = None  # the pretraining phase's result, when it ran now
    parameters: int = 0  # the model's, counted once (the line printed, train_summary.json)


def start_model(
    cfg,
    prepared: PreparedData,
    out: str | Path | None,
    device: torch.device,
    *,
    resume: ckpt_lib.ResumePoint,
    start=None,
    progress: bool = False,
    stderr: TextIO | None = None,
    describe: bool = False,
) -> Built:
    """The model ``cfg`` describes, seeded (the same initial weights for the same shape whatever the data stage
    drew), its embeddings set (``cfg.init_embeddings``, or ``start(model, tokenizer)``, notebook 06) and, with
    ``cfg.pretrain``, pretrained on unpaired sentences for the first share of the budget.

    ``resume``: what the run continues (:func:`helpers.training.checkpoint.resume_point`, decided once by the caller;
    ``checkpoint.FRESH`` for a new run). Once translation has a checkpoint its weights win, so neither the embeddings
    nor the pretraining are redone (the training loop loads the checkpoint over these weights); an unfinished
    pretraining phase continues from its own checkpoint.

    ``describe`` prints what was built first (``train``'s "Model:" line: size, shape, variant, data, device and
    number format), before any embeddings or pretraining say what they did."""
    runtime.set_seed(cfg.seed)
    model = build_model(cfg.model_config(prepared.tokenizer.vocab_size, device))
    parameters = num_parameters(model.config)
    if describe:
        of_all = "" if cfg.parallel_pairs is None else f" (of {prepared.info['pairs']['train']:,})"
        print(
            f"Model: {parameters / 1e6:.2f} M parameters ({cfg.n_layer} layers, d_model {cfg.d_model}, vocabulary "
            f"{prepared.tokenizer.vocab_size}{describe_variant(model.config)}); {len(prepared.train_batcher.examples):,} "
            f"training pairs{of_all}; device {device}, precision {runtime.resolve_precision(device, cfg.precision)}"
            f"{describe_muon(cfg, device)}.",
            file=stderr if stderr is not None else sys.stderr,
        )
    fresh = resume.translation is None
    transfer = None
    if fresh and cfg.init_embeddings:
        transfer = embedding_transfer.init_embeddings(model, prepared.tokenizer, cfg.init_embeddings)
    if fresh and start is not None:
        transfer = start(model, prepared.tokenizer)
    translate_cfg, pretrained = cfg, None
    if cfg.pretrain:  # the first share of the budget on unpaired sentences, the rest on translation
        translate_cfg = split_budget(cfg)[1]
        if fresh:  # once translation has started, its checkpoint holds the weights
            pretrained = pretrain_phase(
                model,
                prepared,
                cfg,
                out,
                resume_from=resume.pretraining,
                device=device,
                progress=progress,
                stderr=stderr,
            )
    return Built(model, translate_cfg, transfer, pretrained, parameters)


# ----------------------------------------------------------------------------------------------
# a trained run, back


@dataclass
class Run:
    """A run folder read back: our model from ``train`` (``scratch``), or a fine-tuned Hugging Face model from
    ``finetune``. Evaluation calls ``translator`` either way; what only our model has (its configuration, the
    beam's candidates that ``translate --explain`` takes apart) is asked of the run, never of its model's class."""

    model: object
    tokenizer: object
    config: dict
    step: int
    path: Path
    words: object = None  # helpers.text.testsets.WordTable of the training split, when the run folder has one
    # what evaluation calls (helpers.evaluation.translation.Translator): our model and tokenizer unless given
    translator: object = None
    scratch: bool = True  # our DecoderOnlyTransformer, written by `train`; False: a model written by `finetune`

    def __post_init__(self):
        if self.translator is None:
            self.translator = ScratchTranslator(self.model, self.tokenizer)

    @property
    def name(self) -> str:
        """The model's name in an evaluation record."""
        return f"scratch ({self.path.name})" if self.scratch else self.model.name

    @property
    def parameters(self) -> int:
        """The model's parameters: ours counted from its configuration, a pretrained one's from its weights."""
        return num_parameters(self.model.config) if self.scratch else self.model.parameters()


def load_run(checkpoint: str | Path, device: str | torch.device | None = None) -> Run:
    """The model (eval mode) and tokenizer of a run folder written by ``train``, or the
    :class:`helpers.hf.translator.HFTranslator` of a folder written by ``finetune`` (its ``tokenizer`` is the
    translator's). Either way ``run.translator`` is what :func:`helpers.evaluation.evaluate.evaluate_pairs` and
    ``translate_lines`` take.
    Any other folder is refused, saying what it holds."""
    folder = Path(checkpoint)
    if folder.is_file():
        folder = folder.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} does not exist: pass a run folder written by train or finetune.")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    run_folder = RunFolder(folder)
    words = WordTable.load(run_folder.words) if run_folder.words.is_file() else None
    if run_folder.finetune_info.is_file():
        translator = loading.load_pretrained(folder, device=device)
        info = json.loads(run_folder.finetune_info.read_text(encoding="utf-8"))
        step = int((info.get("result") or {}).get("steps", 0))
        return Run(translator, translator.tokenizer, info, step, folder, words, translator=translator, scratch=False)
    if ckpt_lib.find_checkpoint(folder) is None:
        raise FileNotFoundError(
            f"{folder} is {loading.describe_folder(folder)}; expected a run folder written by "
            f"`python -m helpers train` (checkpoint and {TOKENIZER}/) or by `python -m helpers finetune` ({FINETUNE_INFO})."
        )
    saved = ckpt_lib.load_checkpoint(folder, map_location="cpu")
    tok_dir = run_folder.tokenizer
    if not tok_dir.is_dir():
        raise FileNotFoundError(
            f"{folder} has a checkpoint but no {tok_dir.name}/ folder beside it: pass the whole run folder "
            "written by `python -m helpers train` (checkpoint and tokenizer travel together)."
        )

    model = build_model(ModelConfig.from_dict(saved["config"]["model"]))
    model.load_state_dict(ckpt_lib.inference_weights(saved))  # an older run's moving average, when it kept one
    model.to(device).eval()
    return Run(model, Tokenizer.load(tok_dir), saved["config"], int(saved["step"]), folder, words)


def training_pairs_of(run):
    """The pairs of the run's training file, which the newer-sentence download is filtered against, or None when
    that file is not on this machine (then only the local development file can be used)."""
    data = (run.config or {}).get("data", {}) if isinstance(run.config, dict) else {}
    source = data.get("source")
    if not source or source == "builtin" or not Path(source).is_file():
        return None

    return load_path(source, tuple(data["columns"]) if data.get("columns") else None)[0]

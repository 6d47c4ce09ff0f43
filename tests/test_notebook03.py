"""Notebook 03: its outputs for the report, its checks catch the mistakes they name, and its training
loop is helpers.train.train (identical weights from the same seed, and interchangeable checkpoints).

The notebook runs once in-process in quick mode (tiny preset, built-in corpus). Each check is then
called with a deliberately broken input, or re-run with one piece of ``TrainingRun``'s resume replaced
by a plausible mistake (the optimizer not restored, the random state not restored, ...), and must raise
AssertionError; with the real code it passes. The parity test is shown to be sensitive by mutating one
line of the notebook's step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from helpers import checkpoint as ck
from helpers import config as C
from helpers import data as D
from helpers import evaluate as E
from helpers import runtime
from helpers import tokens as TK
from helpers import train as T
from helpers.model import DecoderOnlyTransformer, num_parameters
from helpers.notebooks import code_cells, exec_cells

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03_translate_fr_en.py"
FIGURES = ["03_example_format", "03_lengths", "03_lr_schedule", "03_loss", "03_attention_heatmaps", "03_bleu_by_length"]


@pytest.fixture(scope="module")
def nb():
    threads = (
        torch.get_num_threads()
    )  # quick mode sets one thread for the tiny model; give the rest of the session its own
    cells = code_cells(NOTEBOOK)
    ns = exec_cells(cells, {"__name__": "__notebook__"}, name="notebook 03")
    yield cells, ns
    torch.set_num_threads(threads)
    shutil.rmtree(ns["RUN_DIR"], ignore_errors=True)


@pytest.fixture(scope="module")
def ns(nb):
    return nb[1]


def cell_defining(cells, name):
    found = [c for c in cells if f"def {name}(" in c.source]
    assert len(found) == 1, f"expected one cell defining {name}, found {len(found)}"
    return found[0]


def mutated_loop(nb, old: str, new: str):
    """The notebook's train_loop, re-executed with one line of its source replaced (a plausible mistake)."""
    cells, ns = nb
    cell = cell_defining(cells, "train_loop")
    assert cell.source.count(old) == 1, f"the training loop no longer contains {old!r}: update this test"
    env = dict(ns)
    exec(compile(cell.source.replace(old, new), "<notebook 03 train_loop, mutated>", "exec"), env)
    return env["train_loop"]


# ---------------------------------------------------------------------------------------------
# what the notebook writes for the report


def test_metrics_json_has_every_key_with_sane_values(ns):
    path = runtime.metrics_dir() / "03_scratch.json"
    m = json.loads(path.read_text())
    for key in ("bleu", "chrf"):
        assert isinstance(m[key], float) and 0 <= m[key] <= 100
    assert m["bleu_signature"].startswith("nrefs:1|") and "tok:13a" in m["bleu_signature"]
    assert m["chrf_signature"].startswith("nrefs:1|") and "nc:6" in m["chrf_signature"]
    assert set(m["decoding"]) == {"greedy", "beam4"} and m["decoding"]["greedy"]["bleu"] == m["bleu"]
    assert all(0 <= d["bleu"] <= 100 and d["sentences"] > 0 for d in m["decoding"].values())
    assert set(m["copy_baseline"]) == {"bleu", "chrf"} and m["bleu"] > m["copy_baseline"]["bleu"]
    assert m["parameters"] == num_parameters(ns["model_cfg"]) == sum(p.numel() for p in ns["model"].parameters())
    assert isinstance(m["steps"], int) and m["steps"] == ns["result"].steps and 0 < m["steps"] <= ns["TRAIN_STEPS"]
    assert isinstance(m["tokens_seen"], int) and m["tokens_seen"] > m["steps"]
    assert m["minutes_trained"] > 0 and m["tokens_per_s"] > 0
    assert m["val_loss"] > 0 and m["val_ppl"] == pytest.approx(2.718281828 ** m["val_loss"], rel=1e-6)
    assert {"device", "name", "memory_gb", "fp16_native", "bf16_native", "torch_version"} <= set(m["hardware"])
    assert m["config"]["preset"] == "tiny" and m["config"]["train"] == ns["cfg"].to_dict()
    assert m["config"]["model"]["vocab_size"] == ns["tok"].vocab_size
    assert m["quick"] is True and m["data"]["synthetic"] is True and m["data"]["source"] == "builtin"
    assert m["test_sentences"] == len(ns["prepared"].test_pairs)
    assert [r["bucket"] for r in m["bleu_by_length"]["greedy"]], "BLEU by length is empty"
    json.dumps(m)  # plain JSON all the way down


def test_every_figure_is_saved_as_pdf_and_png(ns):
    folder = runtime.figures_dir()
    for name in FIGURES:
        assert (folder / f"{name}.pdf").read_bytes()[:4] == b"%PDF", name
        assert (folder / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name


def test_the_run_folder_holds_checkpoint_tokenizer_and_readable_info(ns):
    run = Path(ns["RUN_DIR"])
    assert (run / "checkpoint.pt").is_file() and (run / "tokenizer" / "spm.model").is_file()
    info = json.loads((run / "checkpoint.json").read_text())
    assert info["step"] == ns["result"].steps and info["train_state"]["final"] is True


# ---------------------------------------------------------------------------------------------
# the example format


def collate_unshifted(examples, pad_id=TK.PAD_ID):
    batch = TK.collate(examples, pad_id)
    for b, e in enumerate(examples):  # label = the token itself, not the next one
        batch.labels[b, e.prefix_len : len(e.input_ids)] = batch.input_ids[b, e.prefix_len : len(e.input_ids)]
        batch.labels[b, e.prefix_len - 1] = -100
    return batch


def collate_loss_on_french(examples, pad_id=TK.PAD_ID):
    batch = TK.collate(examples, pad_id)
    for b, e in enumerate(examples):  # every next token scored, the French included
        batch.labels[b, : len(e.input_ids) - 1] = batch.input_ids[b, 1 : len(e.input_ids)]
    return batch


def collate_padding_scored(examples, pad_id=TK.PAD_ID):
    batch = TK.collate(examples, pad_id)
    T_ = batch.input_ids.shape[1]
    for b, e in enumerate(examples):  # predicting padding after <eos> counted as a target
        batch.labels[b, len(e.input_ids) - 1 : T_ - 1] = batch.input_ids[b, len(e.input_ids) : T_]
    return batch


@pytest.mark.parametrize("buggy", [collate_unshifted, collate_loss_on_french, collate_padding_scored])
def test_example_check_fails_on_a_wrong_collate(ns, buggy):
    ns["check_example_format"](TK.collate)
    with pytest.raises(AssertionError, match="label"):
        ns["check_example_format"](buggy)


def test_example_check_cell_fails_with_a_buggy_collate_swapped_in(nb):
    cells, ns = nb
    cell = cell_defining(cells, "check_example_format")
    env = dict(ns)
    env["TK"] = type(
        "PatchedTokens",
        (),
        {
            "make_example": staticmethod(TK.make_example),
            "collate": staticmethod(collate_unshifted),
            "PAD_ID": TK.PAD_ID,
        },
    )
    with pytest.raises(AssertionError):
        exec(compile(cell.source, "<notebook 03 check cell>", "exec"), env)


# ---------------------------------------------------------------------------------------------
# no leak


def test_leak_check_fails_when_a_training_pair_is_in_the_test_set(ns):
    prepared, tok = ns["prepared"], ns["tok"]
    train_examples = prepared.train_batcher.examples
    ns["check_no_leak"](prepared.reports["split"], train_examples, prepared.test_pairs, tok)
    ex = train_examples[0]
    leaked = (tok.decode(ex.input_ids[1 : ex.prefix_len - 1]), tok.decode(ex.input_ids[ex.prefix_len : -1]))
    with pytest.raises(AssertionError, match="training sources"):
        ns["check_no_leak"](prepared.reports["split"], train_examples, [*prepared.test_pairs, leaked], tok)
    only_reference = (
        "Une phrase que personne n'a jamais écrite ici.",
        leaked[1],
    )  # new French, a training target as reference
    with pytest.raises(AssertionError, match="training targets"):
        ns["check_no_leak"](prepared.reports["split"], train_examples, [*prepared.test_pairs, only_reference], tok)


def test_leak_check_reads_the_split_report(ns):
    prepared, tok = ns["prepared"], ns["tok"]
    bad = D.SplitReport(french_in_two_splits=3)
    with pytest.raises(AssertionError, match="two splits"):
        ns["check_no_leak"](bad, prepared.train_batcher.examples, prepared.test_pairs, tok)


# ---------------------------------------------------------------------------------------------
# resuming


def _check_resume(nb, loop, tmp_path):
    _, ns = nb
    ns["check_resume"](loop, ns["prepared"].train_batcher.examples, ns["tok"].vocab_size, tmp_path)


def test_resume_check_passes_with_the_notebook_loop(nb, tmp_path):
    _check_resume(nb, nb[1]["train_loop"], tmp_path)


def _restore_without_optimizer(run, saved):
    ck.restore(saved, model=run.model, scaler=run.scaler)


def _restore_without_rng(run, saved):
    ck.restore(saved, model=run.model, optimizer=run.optimizer, scaler=run.scaler, rng=False)


def _restore_data_from_the_start(run, saved):
    run.batcher.set_epoch(0)
    return T._epoch_stream(run.batcher, run.data_state)


def _restart_the_schedule(run, saved):
    ORIGINAL["_restore_counters"](run, saved)
    run.step = 0


ORIGINAL = {name: getattr(T.TrainingRun, name) for name in ("_restore_state", "_restore_counters", "_restore_data")}
# each replaces one piece of TrainingRun's resume with a plausible mistake
MISTAKES = {
    "optimizer state not restored": ("_restore_state", _restore_without_optimizer),
    "random state not restored": ("_restore_state", _restore_without_rng),
    "data position not restored": ("_restore_data", _restore_data_from_the_start),
    "schedule restarted": ("_restore_counters", _restart_the_schedule),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_resume_check_fails_when_the_checkpoint_misses_state(nb, tmp_path, monkeypatch, mistake):
    name, buggy = MISTAKES[mistake]
    monkeypatch.setattr(T.TrainingRun, name, buggy)
    with pytest.raises(AssertionError):
        _check_resume(nb, nb[1]["train_loop"], tmp_path)


def test_resume_check_fails_when_another_configuration_is_accepted(nb, tmp_path, monkeypatch):
    monkeypatch.setattr(T.ckpt_lib, "check_config", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="another learning rate was resumed"):
        _check_resume(nb, nb[1]["train_loop"], tmp_path)


# ---------------------------------------------------------------------------------------------
# scores and the baseline


def test_score_check_fails_on_the_copy_baseline_and_on_misaligned_translations(ns):
    greedy, references, sources = ns["greedy"], ns["references"], ns["sources"]
    ns["check_scores"](greedy, references, sources)
    with pytest.raises(AssertionError, match="do not beat copying"):
        ns["check_scores"](list(sources), references, sources)  # the copy baseline itself
    with pytest.raises(AssertionError):
        ns["check_scores"](sorted(greedy, key=len), references, sources)  # sorted for batching, never put back
    # fluent English in the wrong order (each line is the next sentence's reference) beats copying the French,
    # so only the alignment test can catch it
    with pytest.raises(AssertionError, match="wrong references"):
        ns["check_scores"](references[1:] + references[:1], references, sources)
    with pytest.raises(AssertionError, match="one translation per source"):
        ns["check_scores"](greedy[:-1], references, sources)


def test_the_notebook_scores_are_sacrebleu_on_its_translations(ns):
    """What the notebook prints and saves is sacreBLEU on the decoded test set, recomputed here."""
    import sacrebleu

    greedy, references = ns["greedy"], ns["references"]
    assert ns["scores"]["greedy"]["bleu"] == round(sacrebleu.corpus_bleu(greedy, [references]).score, 2)
    assert ns["scores"]["greedy"]["chrf"] == round(sacrebleu.corpus_chrf(greedy, [references]).score, 2)
    again = E.translate(ns["model"], ns["tok"], ns["sources"][:20], beams=1, use_cache=False)
    assert again == greedy[:20], "cached and uncached greedy decoding disagree"


def test_checkpoint_check_fails_on_other_weights_or_step(ns):
    model, run_dir, steps = ns["model"], ns["RUN_DIR"], ns["result"].steps
    ns["check_checkpoint_is_model"](model, run_dir, steps)
    other = DecoderOnlyTransformer(ns["model_cfg"])
    other.load_state_dict(model.state_dict())
    with torch.no_grad():
        other.ln_f.weight.add_(1e-3)
    with pytest.raises(AssertionError, match="ln_f.weight"):
        ns["check_checkpoint_is_model"](other, run_dir, steps)
    with pytest.raises(AssertionError, match="step"):
        ns["check_checkpoint_is_model"](model, run_dir, steps + 1)


# ---------------------------------------------------------------------------------------------
# defined once: the notebook's loop is helpers.train.train


@pytest.fixture(scope="module")
def parity_data():
    cfg = C.preset_config(
        "tiny", steps=60, log_interval=10, eval_interval=20, checkpoint_every_steps=25, checkpoint_minutes=1e6, seed=0
    )
    prepared = D.prepare_data("builtin", cfg, None, seed=0, limit=1500, progress=False)
    return cfg, prepared


def _fresh(cfg, prepared, seed=0):
    runtime.set_seed(seed)
    model = DecoderOnlyTransformer(cfg.model_config(prepared.tokenizer.vocab_size))
    batcher = TK.BucketBatcher(prepared.train_batcher.examples, max_tokens=cfg.max_tokens, seed=0)
    return model, batcher


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    return all(torch.equal(sa[k], sb[k]) for k in sa)


def test_notebook_loop_and_helpers_train_end_with_identical_weights(ns, parity_data, tmp_path):
    cfg, prepared = parity_data
    nb_model, batcher = _fresh(cfg, prepared)
    nb_result = ns["train_loop"](nb_model, batcher, prepared.valid_batches, cfg, tmp_path / "notebook", progress=False)
    pkg_model, batcher = _fresh(cfg, prepared)
    pkg_result = T.train(pkg_model, batcher, prepared.valid_batches, cfg, tmp_path / "package", progress=False)
    assert nb_result.steps == pkg_result.steps == 60 and nb_result.tokens == pkg_result.tokens
    assert _same_weights(nb_model, pkg_model), "the notebook's loop and helpers.train.train end with different weights"
    nb_ck, pkg_ck = ck.load_checkpoint(tmp_path / "notebook"), ck.load_checkpoint(tmp_path / "package")
    for state_nb, state_pkg in zip(nb_ck["optimizer"]["state"].values(), pkg_ck["optimizer"]["state"].values()):
        assert all(torch.equal(state_nb[k], state_pkg[k]) for k in state_pkg), "AdamW moments differ"
    assert nb_ck["data_state"] == pkg_ck["data_state"] and nb_ck["config"] == pkg_ck["config"]
    assert [(h["step"], h["val_loss"]) for h in nb_result.history if "val_loss" in h] == [
        (h["step"], h["val_loss"]) for h in pkg_result.history if "val_loss" in h
    ]


STEP_MISTAKES = {
    "no label smoothing": ("T.loss_fn(logits, labels, cfg.label_smoothing)", "T.loss_fn(logits, labels)"),
    "gradients never zeroed": ("run.optimizer.zero_grad(set_to_none=True)", "pass"),
}


@pytest.mark.parametrize("mistake", list(STEP_MISTAKES))
def test_parity_comparison_notices_a_changed_step(nb, parity_data, tmp_path, mistake):
    """The comparison above is sensitive: a notebook step with one plausible mistake ends with other weights."""
    cfg, prepared = parity_data
    loop = mutated_loop(nb, *STEP_MISTAKES[mistake])
    nb_model, batcher = _fresh(cfg, prepared)
    loop(nb_model, batcher, prepared.valid_batches, cfg, tmp_path / "notebook", progress=False)
    pkg_model, batcher = _fresh(cfg, prepared)
    T.train(pkg_model, batcher, prepared.valid_batches, cfg, tmp_path / "package", progress=False)
    assert not _same_weights(nb_model, pkg_model)


class _Disconnect(Exception):
    pass


def _cut_at(step):
    def callback(record, history):
        if record["step"] >= step:
            raise _Disconnect()

    return callback


@pytest.mark.parametrize("first,second", [("notebook", "package"), ("package", "notebook")])
def test_a_run_cut_in_one_loop_resumes_in_the_other_to_the_same_weights(ns, parity_data, tmp_path, first, second):
    """The checkpoints are interchangeable: start in the notebook, finish with `python -m helpers train`, or the reverse."""
    cfg, prepared = parity_data
    loops = {"notebook": ns["train_loop"], "package": T.train}
    straight, batcher = _fresh(cfg, prepared)
    T.train(straight, batcher, prepared.valid_batches, cfg, tmp_path / "straight", progress=False)
    model, batcher = _fresh(cfg, prepared)
    with pytest.raises(_Disconnect):
        loops[first](
            model, batcher, prepared.valid_batches, cfg, tmp_path / "cut", progress=False, callback=_cut_at(40)
        )
    assert ck.load_checkpoint(tmp_path / "cut")["step"] == 25
    model, batcher = _fresh(cfg, prepared, seed=1)
    result = loops[second](model, batcher, prepared.valid_batches, cfg, tmp_path / "cut", progress=False)
    assert result.resumed_from == 25 and result.steps == 60
    assert _same_weights(straight, model)

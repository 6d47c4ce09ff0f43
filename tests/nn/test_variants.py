"""helpers.nn.variants: notebook 05's training-speed levers from the GPT-2 speedrun, switched on ModelConfig
(QK-norm, ReLU², zero-initialised output projections, an untied output head).

Each check is written so that a plausible mistake fails it; the comment above each says which."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from helpers.nn import build_model
from helpers.nn.model import DecoderOnlyTransformer, ModelConfig
from helpers.runtime import ConfigMismatchError


def tiny_model(**kw) -> DecoderOnlyTransformer:
    """Two blocks of width 8 over 20 tokens: a model built in milliseconds (tests/training/test_optim.py too)."""
    return build_model(ModelConfig(vocab_size=20, max_len=8, n_layer=2, n_head=2, d_model=8, **kw))


def test_qk_norm_bounds_the_scores_and_changes_the_function():
    torch.manual_seed(1)
    plain, normed = tiny_model(), tiny_model(qk_norm=True)
    normed.load_state_dict(plain.state_dict())  # no new parameters: the same weights load
    ids = torch.randint(3, 20, (2, 8))
    assert not torch.allclose(plain(ids), normed(ids))  # the switch is not ignored
    with torch.no_grad():  # queries and keys scaled up 30x (weights and biases): plain scores grow 900x
        for m in (plain, normed):
            m.blocks[0].attn.qkv.weight[:16] *= 30
            m.blocks[0].attn.qkv.bias[:16] += 1.0
            m.blocks[0].attn.qkv.bias[:16] *= 30
        maps_plain, maps_normed = plain.attention_maps(ids)[0], normed.attention_maps(ids)[0]
    assert maps_plain[..., 1:, :].amax(-1).mean() > 0.95  # near one-hot rows
    # normalised queries and keys do not see a scale at all (a norm on q only, or none, would move these maps)
    assert maps_normed[..., 1:, :].amax(-1).mean() < 0.9
    plain_bias = tiny_model(qk_norm=True)
    plain_bias.load_state_dict(normed.state_dict())
    with torch.no_grad():
        plain_bias.blocks[0].attn.qkv.weight[:16] /= 30
        plain_bias.blocks[0].attn.qkv.bias[:16] /= 30
    torch.testing.assert_close(plain_bias.attention_maps(ids)[0], maps_normed)


def test_relu2_and_zero_init():
    x = torch.tensor([-2.0, 0.0, 3.0])
    assert torch.equal(tiny_model(activation="relu2").blocks[0].ffn.act(x), torch.tensor([0.0, 0.0, 9.0]))
    zero = tiny_model(zero_init=True)
    assert all(not b.attn.proj.weight.any() and not b.ffn.proj.weight.any() for b in zero.blocks)
    ids = torch.randint(3, 20, (1, 8))
    x0 = zero.embed(ids, torch.arange(8))
    assert torch.allclose(zero.blocks[0](x0), x0)  # each block starts as the identity
    assert tiny_model().blocks[0].attn.proj.weight.any()  # the default is unchanged
    with pytest.raises(ValueError, match="activation"):
        tiny_model(activation="swish")
    with pytest.raises(ValueError, match="qk_norm"):
        tiny_model(attention="synthesizer", qk_norm=True)


def test_untied_head_has_its_own_matrix_and_counts_it():
    from helpers.nn.model import num_parameters

    model = tiny_model(tie_weights=False)
    assert model.lm_head.weight is not model.tok_emb.weight
    assert sum(p.numel() for p in model.parameters()) == num_parameters(model.config)
    assert not math.isnan(float(model(torch.randint(3, 20, (1, 4))).sum()))


# ---------------------------------------------------------------------------------------------
# checkpoints written before the variants were built on the model (commit 12dca60) still load and resume

OLD_CHECKPOINTS = Path(__file__).parent / "checkpoints_12dca60"  # how they were made: its README.md
OLD_RUNS = {  # folder: (the train switches it was made with, the class build_model must build)
    # learned positions were the default then (rotary since): the switch that resumes them now
    "plain": ({"positional": "learned"}, "DecoderOnlyTransformer"),
    "synth": ({"attention": "synthesizer", "positional": "learned"}, "VariantTransformer"),
    "neck": ({"bottleneck_dim": 8, "positional": "learned"}, "BottleneckTransformer"),
    "alibi": ({"positional": "alibi", "qk_norm": True}, "VariantTransformer"),
    "rotary": ({"positional": "rotary", "zero_init": True}, "VariantTransformer"),
}


@pytest.mark.training
@pytest.mark.parametrize("name", list(OLD_RUNS))
def test_a_checkpoint_of_the_earlier_format_loads_translates_and_resumes(name, tmp_path):
    from helpers import pipeline
    from helpers.commands import train_command
    from helpers.training import checkpoint as ck
    from helpers.training import config as C
    from helpers.training import optim

    switches, cls = OLD_RUNS[name]
    folder = tmp_path / name
    shutil.copytree(OLD_CHECKPOINTS / name, folder)
    saved = ck.load_checkpoint(folder / "checkpoint.pt")
    run = pipeline.load_run(folder)
    assert type(run.model).__name__ == cls and saved["step"] == 4
    # every saved tensor is in the model, under its old name, with its old value
    now = run.model.state_dict()
    assert set(now) == set(saved["model"]) and all(torch.equal(now[k], v) for k, v in saved["model"].items())
    assert len(run.translator.translate(["je suis content ."], beams=2)) == 1
    # the optimiser's state is stored by parameter order: each moment must land on a parameter of its own shape
    cfg = C.TrainConfig.from_dict(saved["config"]["train"])
    opt = optim.make_optimizer(run.model, cfg, "cpu")
    opt.load_state_dict(saved["optimizer"])
    inner = getattr(opt, "optimizers", [opt])
    misplaced = [
        (tuple(p.shape), tuple(st["exp_avg"].shape))
        for o in inner
        for g in o.param_groups
        for p in g["params"]
        if (st := o.state.get(p)) and "exp_avg" in st and st["exp_avg"].shape != p.shape
    ]
    assert misplaced == [], "the optimiser's saved moments land on parameters of another shape"
    # today's defaults differ from the run's (Muon at 0.7 x lr since issue 51, at lr then): refused, naming the field
    with pytest.raises(ConfigMismatchError, match="muon_lr_scale: 1.0 in the checkpoint, 0.7 now"):
        train_command("builtin", steps=6, out=folder, preset="tiny", seed=3, overrides=switches, progress=False)
    # resume with its own settings: the optimiser's state goes back onto the same parameters, in the same order,
    # and two more steps run
    result = train_command("builtin", steps=6, out=folder, preset="tiny", seed=3, overrides={**switches, "muon_lr_scale": 1.0},
                           progress=False, dev_score=False)  # fmt: skip
    assert result.resumed_from == 4 and result.steps == 6


def test_the_model_line_names_what_differs_from_the_recipes_model():
    """train's "Model: ..." line (helpers.pipeline): nothing for the recipe's model, else each difference by name."""
    from helpers.nn.variants import describe_variant

    base = ModelConfig(vocab_size=50, max_len=24, n_layer=1, n_head=2, d_model=16, positional="rotary")
    assert describe_variant(base) == ""
    assert describe_variant(replace(base, rotary_base=1000.0)) == ", rotary base 1000"
    assert describe_variant(replace(base, positional="learned", rotary_base=1000.0)) == ", learned positions"
    assert describe_variant(replace(base, qk_norm=True)) == ", QK-norm"

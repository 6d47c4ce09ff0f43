"""Issue 28: newer Tatoeba sentences (the development set and its download), long sources translated in pieces,
and the training levers (Muon, the warm-up-stable-decay schedule, QK-norm, ReLU², zero-initialised projections).

Each check is written so that a plausible mistake fails it; the comment above each says which."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from helpers.evaluation import evaluate as E
from helpers.nn.model import DecoderOnlyTransformer, ModelConfig
from helpers.text import testsets
from helpers.text.sources import DownloadError
from helpers.training.config import TrainConfig, preset_config
from helpers.training.train import MuonWithAdamW, lr_at, make_optimizer

TRAINING = [("Je mange.", "I eat."), ("Il dort.", "He sleeps."), ("Tu lis.", "You read.")]
CHALLENGE = [
    ("Je mange.", "I am eating."),  # French seen in training: out
    ("Elle mange.", "He sleeps."),  # English seen in training: out
    ("Nous chantons.", "We sing."),  # new on both sides: kept
    ("Nous chantons.", "We sing."),  # the same pair again: kept once
    ("  Vous dansez. ", "You dance."),  # new; spaces stripped
]


# ---------------------------------------------------------------------------------------------- the newer sentences


def test_newer_pairs_keeps_only_pairs_new_on_both_sides_and_counts_the_rest():
    # a filter on the French side only would keep ("Elle mange.", "He sleeps."); one without dedup would keep 3
    kept, counts = testsets.newer_pairs(CHALLENGE, TRAINING)
    assert kept == [("Nous chantons.", "We sing."), ("Vous dansez.", "You dance.")]
    assert counts == {
        "French sentence in the training file": 1,
        "English sentence in the training file": 1,
        "the same pair again": 1,
    }
    assert len(kept) + sum(counts.values()) == len(CHALLENGE)  # nothing leaves without a reason


def _challenge_files(folder):
    (folder / "t.fra").write_text("".join(fr + "\n" for fr, _ in CHALLENGE), encoding="utf-8")
    (folder / "t.eng").write_text("".join(en + "\n" for _, en in CHALLENGE), encoding="utf-8")
    return (folder / "t").as_uri()


def test_fetch_newer_sentences_downloads_once_filters_and_reports(tmp_path):
    # the real download code, through file:// addresses: a second call must read the cache, not the network
    base = _challenge_files(tmp_path)
    pairs, report = testsets.fetch_newer_sentences(TRAINING, tmp_path / "cache", base_url=base)
    assert pairs == [("Nous chantons.", "We sing."), ("Vous dansez.", "You dance.")]
    assert report.kept == 2 and report.lines_read == 5 and sum(report.skipped.values()) == 3
    (tmp_path / "t.fra").unlink()  # gone from the "network": the cached copy must serve
    again, _ = testsets.fetch_newer_sentences(TRAINING, tmp_path / "cache", base_url=base)
    assert again == pairs


def test_fetch_newer_sentences_says_what_to_do_offline(tmp_path):
    with pytest.raises(DownloadError, match="needs the network once.*by path"):
        testsets.fetch_newer_sentences(TRAINING, tmp_path, base_url=(tmp_path / "missing").as_uri())


def test_load_newer_prefers_the_local_development_file(tmp_path, monkeypatch):
    dev = tmp_path / "dev.tsv"
    dev.write_text("Nous chantons.\tWe sing.\nVous dansez.\tYou dance.\n", encoding="utf-8")
    monkeypatch.setenv("TATOEBA_NEWER_DEV", str(dev))
    pairs, report, label = testsets.load_newer_sentences()
    assert pairs == [("Nous chantons.", "We sing."), ("Vous dansez.", "You dance.")] and "development" in label
    # without the file (and no shared copy beside the repository), no training pairs: a message, not a guess
    monkeypatch.setattr(testsets, "find_newer_dev", lambda: None)
    with pytest.raises(testsets.DataError, match="training pairs"):
        testsets.load_newer_sentences()


# ---------------------------------------------------------------------------------------------- long sources


def _words(text):  # a stand-in tokenizer: one token per word
    return text.split()


def test_split_to_fit_cuts_at_sentences_then_commas_then_words_and_loses_nothing():
    text = "Un deux trois. Quatre cinq, six sept huit neuf, dix. Onze"
    pieces = E.split_to_fit(text, _words, 4)
    assert all(len(_words(p)) <= 4 for p in pieces)
    assert " ".join(pieces).split() == text.split()  # every word kept, in order (a cut would drop some)
    assert pieces[0] == "Un deux trois."  # the sentence end, not the 4th word, is the first boundary
    assert "Quatre cinq," in pieces  # then the comma
    assert E.split_to_fit("Court.", _words, 4) == ["Court."]
    words = " ".join(f"m{i}" for i in range(10))  # no punctuation: between words, pieces as long as allowed
    assert [len(_words(p)) for p in E.split_to_fit(words, _words, 4)] == [4, 4, 2]


class _EchoTokenizer:
    """Words as ids; decode gives the words back upper-cased, so a translation shows what was read."""

    bos_id, sep_id, eos_id = 0, 1, 2

    def __init__(self):
        self.vocab = {}

    def encode(self, text):
        return [self.vocab.setdefault(w, len(self.vocab) + 3) for w in text.split()]

    def decode(self, ids):
        inverse = {v: k for k, v in self.vocab.items()}
        return " ".join(inverse[i].upper() for i in ids if i in inverse)


class _CopyModel(torch.nn.Module):
    """generate() returns the source ids: a translator that copies, to follow what happens to long sources."""

    def __init__(self, max_len):
        super().__init__()
        self.config = ModelConfig(vocab_size=10, max_len=max_len, n_layer=1, n_head=1, d_model=4)

    def generate(self, prefixes, budgets, **kw):
        return [p[1:-1] for p in prefixes]


def test_translate_splits_a_long_source_and_joins_the_pieces_in_order():
    # max_len 12: a source budget of 4 tokens. Without the split the 9-word source would come back cut to 4 words
    tok, model = _EchoTokenizer(), _CopyModel(12)
    long = "a b c. d e f, g h i"
    report = E.TranslateReport()
    out = E.translate(model, tok, ["x y", long, ""], report=report)
    assert out == ["X Y", "A B C. D E F, G H I", ""]
    assert report.split == [(2, 9, 3)] and report.truncated == [] and report.empty == 1
    cut = E.TranslateReport()
    assert E.translate(model, tok, [long], report=cut, split_long=False) == ["A B C. D"]
    assert cut.truncated == [(1, 9, 4)] and cut.split == []


# ---------------------------------------------------------------------------------------------- training levers


def test_wsd_holds_the_peak_then_cools_down_linearly_over_the_last_share():
    cfg = TrainConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1, schedule="wsd", cooldown=0.4)
    total = 100
    assert lr_at(5, cfg, total) == pytest.approx(0.6)  # warm-up as before
    assert lr_at(59, cfg, total) == 1.0  # stable until 60 % of the run (a cosine would be at 0.6 here)
    assert lr_at(80, cfg, total) == pytest.approx(0.55)  # half-way down the line from 1.0 to 0.1
    assert lr_at(100, cfg, total) == pytest.approx(0.1) and lr_at(150, cfg, total) == pytest.approx(0.1)
    cosine = TrainConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(59, cosine, total) < 0.7  # the default is still the cosine


def _tiny(**kw):
    return DecoderOnlyTransformer(ModelConfig(vocab_size=20, max_len=8, n_layer=2, n_head=2, d_model=8, **kw))


def test_muon_takes_the_blocks_matrices_and_adamw_the_rest():
    # a split that gave Muon the embedding or the head (or a bias) would fail here: Muon is for hidden matrices
    model = _tiny(tie_weights=False)
    opt = make_optimizer(model, preset_config("tiny", optimizer="muon"))
    assert isinstance(opt, MuonWithAdamW)
    muon, adamw = opt.optimizers
    in_muon = {id(p) for g in muon.param_groups for p in g["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in in_muon}
    assert names == {n for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2}
    in_adamw = {id(p) for g in adamw.param_groups for p in g["params"]}
    assert in_muon.isdisjoint(in_adamw) and len(in_muon | in_adamw) == len(list(model.parameters()))
    assert id(model.lm_head.weight) in in_adamw and id(model.tok_emb.weight) in in_adamw


def test_muon_with_adamw_steps_saves_and_restores_both():
    torch.manual_seed(0)
    model = _tiny()
    cfg = preset_config("tiny", optimizer="muon", lr=0.01)
    opt = make_optimizer(model, cfg)
    ids = torch.randint(3, 20, (2, 8))

    def step(m, o):
        loss = m(ids).logsumexp(-1).mean()
        loss.backward()
        o.step()
        o.zero_grad()

    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    step(model, opt)
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert "blocks.0.attn.qkv.weight" in moved and "tok_emb.weight" in moved  # both inner optimizers stepped
    # a copy restored from the state dict takes the same next step (a lost momentum buffer would not)
    twin = _tiny()
    twin.load_state_dict(model.state_dict())
    twin_opt = make_optimizer(twin, cfg)
    twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # (a state dict shares its tensors)
    step(model, opt)
    step(twin, twin_opt)
    for (n, p), q in zip(model.named_parameters(), twin.parameters()):
        assert torch.equal(p, q), n
    with pytest.raises(ValueError, match="another optimizer"):
        twin_opt.load_state_dict(torch.optim.AdamW(twin.parameters()).state_dict())


def test_lr_schedule_reaches_muon_groups_too():
    model = _tiny()
    opt = make_optimizer(model, preset_config("tiny", optimizer="muon"))
    for g in opt.param_groups:
        g["lr"] = 0.123
    assert all(g["lr"] == 0.123 for o in opt.optimizers for g in o.param_groups)


def test_qk_norm_bounds_the_scores_and_changes_the_function():
    torch.manual_seed(1)
    plain, normed = _tiny(), _tiny(qk_norm=True)
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
    plain_bias = _tiny(qk_norm=True)
    plain_bias.load_state_dict(normed.state_dict())
    with torch.no_grad():
        plain_bias.blocks[0].attn.qkv.weight[:16] /= 30
        plain_bias.blocks[0].attn.qkv.bias[:16] /= 30
    torch.testing.assert_close(plain_bias.attention_maps(ids)[0], maps_normed)


def test_relu2_and_zero_init():
    x = torch.tensor([-2.0, 0.0, 3.0])
    assert torch.equal(_tiny(activation="relu2").blocks[0].ffn.act(x), torch.tensor([0.0, 0.0, 9.0]))
    zero = _tiny(zero_init=True)
    assert all(not b.attn.proj.weight.any() and not b.ffn.proj.weight.any() for b in zero.blocks)
    ids = torch.randint(3, 20, (1, 8))
    x0 = zero.embed(ids, torch.arange(8))
    assert torch.allclose(zero.blocks[0](x0), x0)  # each block starts as the identity
    assert _tiny().blocks[0].attn.proj.weight.any()  # the default is unchanged
    with pytest.raises(ValueError, match="activation"):
        _tiny(activation="swish")
    with pytest.raises(ValueError, match="qk_norm"):
        _tiny(attention="synthesizer", qk_norm=True)


def test_untied_head_has_its_own_matrix_and_counts_it():
    from helpers.nn.model import num_parameters

    model = _tiny(tie_weights=False)
    assert model.lm_head.weight is not model.tok_emb.weight
    assert sum(p.numel() for p in model.parameters()) == num_parameters(model.config)
    assert not math.isnan(float(model(torch.randint(3, 20, (1, 4))).sum()))


def test_a_vocabulary_smaller_than_the_alphabet_is_a_message(tmp_path):
    # sentencepiece's own error is an INTERNAL RuntimeError from C++; the user gets the number to use instead
    from helpers.text.tokens import DataError, Tokenizer

    texts = ["".join(chr(0x4E00 + i) for i in range(k, k + 20)) for k in range(0, 400, 20)]  # 400 distinct characters
    with pytest.raises(DataError, match=r"vocab_size=300 is smaller than .* use vocab_size of at least \d+"):
        Tokenizer.train(texts, vocab_size=300)


# ---------------------------------------------------------------------------------------------- subword sampling


@pytest.fixture(scope="module")
def small_tokenizer():
    from helpers.text.corpus import builtin_corpus
    from helpers.text.tokens import Tokenizer

    pairs = builtin_corpus(400, seed=3, difficulty=2)
    return Tokenizer.train(pairs, vocab_size=500), pairs


def _sampled(tok, pairs, seed=0):
    from helpers.text.tokens import SampledBucketBatcher, encode_pairs

    examples, _ = encode_pairs(tok, pairs, 64)
    return SampledBucketBatcher(examples, pairs, tok, 64, 0.5, 400, seed=seed)


def _epoch_ids(batcher):
    return [b.input_ids.tolist() for b in batcher]


def test_subword_sampling_draws_new_segmentations_each_epoch_reproducibly(small_tokenizer):
    # a batcher that encoded once (no draw per epoch), or drew without the seed, fails one of these
    tok, pairs = small_tokenizer
    a, b = _sampled(tok, pairs), _sampled(tok, pairs)
    e0 = _epoch_ids(a)
    drawn0 = sorted(tuple(ex.input_ids) for ex in a.examples)
    e1 = _epoch_ids(a)  # iterating to the end moved to the next epoch
    drawn1 = sorted(tuple(ex.input_ids) for ex in a.examples)
    assert _epoch_ids(b) == e0 and _epoch_ids(b) == e1  # same seed, same draws, epoch by epoch
    assert drawn0 != drawn1  # another draw of the same sentences, not just another order of one encoding
    assert drawn0 != sorted(tuple(ex.input_ids) for ex in a._plain[0])  # and not the plain encoding
    # every draw decodes back to the same sentences: only the cut into pieces changes
    texts = sorted(tok.decode(ex.input_ids[1 : ex.prefix_len - 1]) for ex in a.examples)
    assert texts == sorted(tok.decode(tok.encode(fr)) for fr, _ in pairs)


def test_subword_sampling_resumes_mid_epoch_exactly(small_tokenizer):
    tok, pairs = small_tokenizer
    whole = _sampled(tok, pairs)
    _epoch_ids(whole)
    it = iter(whole)
    for _ in range(3):
        next(it)
    state = whole.state_dict()
    rest = [b.input_ids.tolist() for b in it]
    resumed = _sampled(tok, pairs)
    resumed.load_state_dict(state)
    assert [b.input_ids.tolist() for b in resumed] == rest  # the same epoch's draw, from the next batch
    other = _sampled(tok, pairs[:-1])
    with pytest.raises(Exception, match="cannot resume"):
        other.load_state_dict(state)


def test_ema_moves_a_share_of_the_way_and_is_what_a_translator_loads(tmp_path):
    # a decay applied the wrong way round (1 - d to the old weights), or a loader that ignores the average, fails
    from helpers.training import checkpoint as ckpt_lib
    from helpers.training.optim import make_ema

    assert make_ema(torch.nn.Linear(2, 2), None) is None
    layer = torch.nn.Linear(3, 2)
    ema = make_ema(layer, 0.9)
    ema.update_parameters(layer)  # the first update copies the weights
    start = layer.weight.detach().clone()
    with torch.no_grad():
        layer.weight.add_(1.0)
    ema.update_parameters(layer)
    assert torch.allclose(ema.module.weight, start + 0.1)  # a tenth of the way to the new weights
    ckpt_lib.save_checkpoint(tmp_path, model=layer, config={}, step=2, ema=ema)
    saved = ckpt_lib.load_checkpoint(tmp_path)
    assert torch.equal(ckpt_lib.inference_weights(saved)["weight"], ema.module.weight.detach())
    assert torch.equal(saved["model"]["weight"], layer.weight.detach())  # training resumes from the raw weights
    again = make_ema(torch.nn.Linear(3, 2), 0.9)
    ckpt_lib.restore(saved, ema=again, rng=False)
    assert torch.equal(again.module.weight, ema.module.weight) and int(again.n_averaged) == 2
    ckpt_lib.save_checkpoint(tmp_path / "plain", model=layer, config={}, step=2)
    plain = ckpt_lib.load_checkpoint(tmp_path / "plain")
    assert ckpt_lib.inference_weights(plain) is plain["model"]
    with pytest.raises(ValueError, match="no moving average"):
        ckpt_lib.restore(plain, ema=again, rng=False)
    with pytest.raises(ValueError, match="ema_decay"):
        TrainConfig(ema_decay=1.0)


def test_joined_pairs_add_long_examples_made_of_two_training_pairs():
    # joining French of one pair to English of another, or drawing without the seed, fails here
    from helpers.text.data import joined_pairs

    pairs = [(f"fr{i}.", f"en{i}.") for i in range(40)]
    joined = joined_pairs(pairs, 0.25, seed=3)
    assert 8 <= len(joined) <= 10 and joined == joined_pairs(pairs, 0.25, seed=3)  # round(0.25 * 40), less i == j
    assert joined != joined_pairs(pairs, 0.25, seed=4)
    for fr, en in joined:
        a, b = fr.split(" ")
        assert en == f"{a.replace('fr', 'en')} {b.replace('fr', 'en')}" and a != b
    assert joined_pairs(pairs, 0.0) == [] and joined_pairs(pairs[:1], 1.0) == []
    with pytest.raises(ValueError, match="concat_pairs"):
        TrainConfig(concat_pairs=1.5)


@pytest.mark.training
def test_muon_wsd_fp16_run_resumes_to_the_same_weights(tmp_path):
    """The T4's path (fp16 with a gradient scaler, here on the CPU) with Muon and WSD: a run stopped at step 6 and
    resumed to 10 ends with exactly the weights of a run that went straight to 10 (a resume that lost Muon's
    momentum, the scaler or the schedule's position would not)."""
    from helpers.cli import train_command
    from helpers.training.checkpoint import load_checkpoint

    levers = {"optimizer": "muon", "schedule": "wsd", "precision": "fp16", "subword_alpha": 0.5, "ema_decay": 0.9,
              "concat_pairs": 0.25}  # fmt: skip
    train_command(
        "builtin", steps=10, out=tmp_path / "straight", preset="tiny", overrides=levers, progress=False, limit=600
    )
    train_command(
        "builtin", steps=6, out=tmp_path / "resumed", preset="tiny", overrides=levers, progress=False, limit=600
    )
    train_command(
        "builtin", steps=10, out=tmp_path / "resumed", preset="tiny", overrides=levers, progress=False, limit=600
    )
    a = load_checkpoint(tmp_path / "straight" / "checkpoint.pt", map_location="cpu")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt", map_location="cpu")
    assert set(a["optimizer"]) == {"muon", "adamw"} and a["step"] == b["step"] == 10
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
        assert torch.equal(a["ema"]["weights"][name], b["ema"]["weights"][name]), name  # the average resumed too
    assert a["ema"]["n_averaged"] == 10
    assert not torch.equal(a["ema"]["weights"]["tok_emb.weight"], a["model"]["tok_emb.weight"])


@pytest.mark.slow
def test_the_shared_development_file_passes_our_filter_against_the_training_file():
    """The download's filter is the one the shared file was built with: every development pair is new to fra.txt
    (run where the shared data is beside the repository; skipped elsewhere)."""
    from helpers.text.sources import find_local_file, find_local_tatoeba, load_path, load_tsv

    # beside the repository only: conftest points $TATOEBA_NEWER_DEV at a stand-in
    dev_path, train_path = find_local_file("NO_SUCH_VARIABLE", testsets.NEWER_DEV_RELATIVE), find_local_tatoeba()
    if dev_path is None or train_path is None:
        pytest.skip("the shared Tatoeba file and development set are not beside the repository")
    dev, _ = load_tsv(dev_path)
    kept, counts = testsets.newer_pairs(dev, load_path(train_path)[0])
    assert len(kept) == len(dev) and counts == {}

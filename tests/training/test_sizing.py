"""The cpu preset sized for the machine it runs on (issue 14): the rule, the measuring, and the train command."""

from __future__ import annotations

import json
import math
import random
import sys
from dataclasses import replace
from itertools import islice
from types import SimpleNamespace

import pytest
import torch

from helpers.text.encoding import Example
from helpers.training import checkpoint as ck
from helpers.training import config as C
from helpers.training import sizing as S

# The first grid's sizes with a 4,000-piece vocabulary: all parameters, and those the rule counts (outside the
# embeddings); the speeds measured on a 2-core fp32 CPU (benchmarks/RESULTS.md, widths 128, 192 and 256: 4,284,
# 3,095 and 1,890 target tokens/s)
FIRST_GRID = [(4, 128), (4, 192), (4, 256), (6, 320)]
MACHINE_B_TOTAL = [1_317_632, 2_566_272, 4_208_128, 8_709_120]
MACHINE_B_PARAMS = [793_344, 1_779_840, 3_159_552, 7_398_400]
MACHINE_B_SPEEDS = [4284.0, 3095.0, 1890.0, 700.0]


def test_the_rule_counts_the_parameters_outside_the_embeddings():
    cfg = C.preset_config("cpu", vocab_size=4000, positional="learned")  # machine B's runs: a learned position table
    for (n, d), total, counted in zip(FIRST_GRID, MACHINE_B_TOTAL, MACHINE_B_PARAMS):
        mc = S.sized(cfg, n, d).model_config(4000)
        assert (S.num_parameters(mc), S.non_embedding_parameters(mc)) == (total, counted)
        # the vocabulary, the position table and an untied head change the total, not what the rule counts
        for change in ({"vocab_size": 8000}, {"max_len": 128}, {"tie_weights": False}, {"positional": "rotary"}):
            other = replace(mc, **change)
            assert S.non_embedding_parameters(other) == counted, change
        assert S.num_parameters(replace(mc, vocab_size=8000)) == total + 4000 * d
        assert S.num_parameters(replace(mc, positional="rotary")) == total - mc.max_len * d  # no table to learn


def test_choose_size_picks_the_largest_model_that_sees_enough_tokens():
    # 15 minutes on machine B: width 192 would see 1.57 tokens per (non-embedding) parameter, width 128 4.86: 128 is
    # chosen (a rule taking the smallest qualifying size would pick 128 too, but see the next lines)
    assert S.choose_size(MACHINE_B_PARAMS, MACHINE_B_SPEEDS, 15 * 60) == 0
    # a bf16 CPU trains about 2.2x faster: width 192 now sees 3.4 tokens per parameter, 256 still 1.2
    assert S.choose_size(MACHINE_B_PARAMS, [2.2 * v for v in MACHINE_B_SPEEDS], 15 * 60) == 1
    # half an hour on machine B: 192 qualifies (3.1), 256 does not (1.1)
    assert S.choose_size(MACHINE_B_PARAMS, MACHINE_B_SPEEDS, 30 * 60) == 1
    # four hours: 256 (8.6) qualifies, the largest (1.4) does not
    assert S.choose_size(MACHINE_B_PARAMS, MACHINE_B_SPEEDS, 4 * 60 * 60) == 2
    # a minute: nothing qualifies, the smallest is the best there is
    assert S.choose_size(MACHINE_B_PARAMS, MACHINE_B_SPEEDS, 60) == 0
    # unmeasured sizes (None) are skipped, not treated as fast
    assert S.choose_size(MACHINE_B_PARAMS, [None, 6500.0, 1890.0, None], 15 * 60) == 1
    with pytest.raises(ValueError, match="increasing order"):
        S.choose_size(list(reversed(MACHINE_B_PARAMS)), MACHINE_B_SPEEDS, 900)


# 15-minute runs with today's recipe (Muon + warm-up-stable-decay): (width, vocabulary, target tok/s of the run,
# minus dev-set BLEU; lower is better). benchmarks/RESULTS.md, and the Intel Xeon runs of issue 51 (2026-11-26: the
# sizing picked width 128 and scored 27.99 on the held-out newer sentences; width 192, cpu-fixed, 30.01).
RUNS = {
    "C, bf16, 4k pieces": [(192, 4000, 7068.0, -27.74), (256, 4000, 5370.0, -26.61)],
    "C, bf16, 8k pieces, ReLU^2": [(192, 8000, 5701.0, -29.75), (256, 8000, 3966.0, -27.55)],
    "Intel Xeon, bf16, 8k pieces, ReLU^2": [(128, 8000, 6100.0, -27.99), (192, 8000, 4150.0, -30.01)],
}


def _rows(runs, count):
    cfg = C.preset_config("cpu")
    return [(count(S.sized(cfg, 4, d).model_config(vocab)), speed, score) for d, vocab, speed, score in runs]


def test_the_threshold_picks_the_best_size_measured_on_each_machine():
    # the probe reads within a few per cent of a run's pace: the choice must hold 5 % either way
    for name, runs in RUNS.items():
        params, speeds, scores = zip(*_rows(runs, S.non_embedding_parameters))
        best = scores.index(min(scores))
        for pace in (0.95, 1.0, 1.05):
            chosen = S.choose_size(list(params), [v * pace for v in speeds], 15 * 60)
            assert chosen == best, f"machine {name}: picked {params[chosen]:,} parameters, best was {params[best]:,}"
            # ... and chosen because it qualifies, not as the smallest there is
            assert speeds[best] * pace * 900 >= S.MIN_TOKENS_PER_PARAMETER * params[best], (name, pace)
    # the first version's threshold (2.25) sends the Intel machine to width 128, two BLEU below width 192
    params, speeds, scores = zip(*_rows(RUNS["Intel Xeon, bf16, 8k pieces, ReLU^2"], S.non_embedding_parameters))
    assert S.choose_size(list(params), list(speeds), 15 * 60, min_tokens_per_parameter=2.25) == 0


# The anchors' speeds read by two probes each, back to back (benchmarks/sizing_probe.py, machine A: 2-core AMD EPYC
# with AVX512-BF16, 2026-11-26, target tok/s at widths 128, 192, 256 and 320), and two read minutes apart by the
# first version of the probe, whose second reading found the machine slower at every width
RECORDED = {
    "A, bf16, probe 1": (11907.0, 8048.0, 5946.0, 4268.0),
    "A, bf16, probe 2": (11887.0, 8010.0, 5912.0, 4347.0),
    "A, fp32, probe 1": (6525.0, 3974.0, 2448.0, 1744.0),
    "A, fp32, probe 2": (6399.0, 4003.0, 2434.0, 1758.0),
    "A, bf16, minutes apart 1": (11909.0, 8208.0, 5950.0, 4120.0),
    "A, bf16, minutes apart 2": (11435.0, 7856.0, 5638.0, 3591.0),
}


def _replay(speeds_by_width, minutes, sizes=None):
    cfg = C.preset_config("cpu", minutes=minutes)
    fake = lambda c, *a, **k: speeds_by_width[c.d_model]  # noqa: E731
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "measure_speed", fake)
        choice = S.size_for_machine(cfg, [], cfg.vocab_size, "cpu", sizes=sizes)
    return choice.chosen, [s["non_embedding"] for s in choice.sizes]


def test_the_grid_moves_by_small_steps_with_head_sizes_the_fused_kernels_take():
    cfg = C.preset_config("cpu")
    shapes = [S.sized(cfg, *size).model_config(cfg.vocab_size) for size in S.CPU_SIZES]
    counted = [S.non_embedding_parameters(m) for m in shapes]
    assert all(b / a <= 1.45 for a, b in zip(counted, counted[1:])), counted  # what the comments promise
    assert all(m.head_dim % 8 == 0 for m in shapes), [m.head_dim for m in shapes]
    assert {m.d_model for m in shapes} >= set(S.ANCHOR_WIDTHS)


@pytest.mark.parametrize("minutes", [5, 15, 60])
def test_a_speed_read_20_percent_off_moves_the_choice_one_step_at_most(minutes):
    """Recorded speeds replayed, scaled by 0.80 ... 1.20: the choice moves by at most one grid step, and by at most
    1.5x in non-embedding parameters."""
    for name, recorded in RECORDED.items():
        speeds = dict(zip(S.ANCHOR_WIDTHS, recorded))
        base, counted = _replay(speeds, minutes)
        for scale in [0.80 + 0.05 * k for k in range(9)]:
            chosen, _ = _replay({w: v * scale for w, v in speeds.items()}, minutes)
            assert abs(chosen - base) <= 1, (name, minutes, scale, base, chosen)
            ratio = max(counted[chosen], counted[base]) / min(counted[chosen], counted[base])
            assert ratio <= 1.5, (name, minutes, scale, ratio)


def test_the_replay_catches_the_first_grid_jumping():
    """The control of the test above: on the first grid (widths 1.5-2x apart) the same replay, 15 minutes, jumps."""
    jumps = []
    for recorded in RECORDED.values():
        speeds = dict(zip((128, 192, 256, 320), recorded))
        base, counted = _replay(speeds, 15, sizes=FIRST_GRID)
        for scale in (0.8, 1.2):
            chosen, _ = _replay({w: v * scale for w, v in speeds.items()}, 15, sizes=FIRST_GRID)
            jumps.append(max(counted[chosen], counted[base]) / min(counted[chosen], counted[base]))
    assert max(jumps) > 1.5, jumps


def test_speeds_between_two_measured_widths_are_interpolated_in_log_log():
    widths = [128, 160, 192, 224, 256]
    filled = S.interpolate_speeds(widths, [None, None, 8000.0, None, 4000.0])
    assert filled[:2] == [None, None] and filled[2] == 8000.0 and filled[4] == 4000.0  # nothing guessed outside
    t = math.log(224 / 192) / math.log(256 / 192)
    assert filled[3] == pytest.approx(8000.0 * 0.5**t)  # speed ~ width^-k between the two: a straight line in log-log
    assert 4000.0 < filled[3] < 6000.0  # nearer the larger width, slower than the arithmetic mean


def test_a_slower_measured_speed_never_picks_a_larger_model():
    # random machines, each made slower size by size by a different factor: the choice never grows. A plausible
    # alternative rule, "the size whose tokens per parameter is closest to the best ratio", fails this.
    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randint(2, 5)
        params = sorted(rng.sample(range(10**5, 10**7), n))
        fast = [rng.uniform(200, 20000) for _ in range(n)]
        slow = [v * rng.uniform(0.05, 1.0) for v in fast]
        minutes = rng.choice([1, 5, 15, 60])
        assert S.choose_size(params, slow, minutes * 60) <= S.choose_size(params, fast, minutes * 60)


def test_size_for_machine_measures_largest_first_and_stops_at_the_first_that_qualifies(monkeypatch):
    measured = []
    bf16_speeds = [2.2 * v for v in MACHINE_B_SPEEDS]  # a CPU with bf16 instructions

    def fake_speed(cfg, examples, vocab_size, device, seconds=3.0):
        measured.append(cfg.d_model)
        assert cfg.attention == "dot" and cfg.positional == "learned"  # the vanilla model's speed
        return dict(zip((128, 192, 256, 320), bf16_speeds))[cfg.d_model]

    monkeypatch.setattr(S, "measure_speed", fake_speed)
    cfg = C.preset_config("cpu", minutes=15.0, positional="alibi")
    choice = S.size_for_machine(cfg, [], 4000, "cpu")
    assert measured == [320, 256, 192]  # the anchors, largest first; 128 is not needed: 192 qualifies
    # width 224, between the anchors 192 and 256, is interpolated (5.2k tok/s: 1.9 tokens per parameter) and qualifies
    assert (choice.cfg.n_layer, choice.cfg.d_model, choice.cfg.d_ff, choice.cfg.n_head) == (4, 224, 896, 4)
    assert choice.cfg.positional == "alibi"  # the variant is kept; only the size changes
    # the recipe's own rotary positions are timed as learned ones too (fake_speed asserts it), and what is reported
    # is the parameters of what will train: no position table
    measured.clear()
    rotary = S.size_for_machine(C.preset_config("cpu", minutes=15.0), [], 4000, "cpu")
    assert rotary.cfg.positional == "rotary" and measured == [320, 256, 192]
    assert [s["parameters"] for s in rotary.sizes] == [
        S.num_parameters(S.sized(rotary.cfg, n, d, h).model_config(4000)) for n, d, h in S.CPU_SIZES
    ]
    widths = [s["d_model"] for s in choice.sizes]
    assert widths == [d for _, d, _ in S.CPU_SIZES] and choice.sizes[1]["n_head"] == 3  # 144: three heads of 48
    assert [choice.sizes[widths.index(d)]["non_embedding"] for d in (128, 192, 256)] == MACHINE_B_PARAMS[:3]
    line = choice.describe()
    assert "Sized for this machine" in line and "interpolated from the widths measured at width 224" in line, line
    assert "width 256 would get 1.2" in line and "the largest with >= 1.8" in line, line
    assert "2.42 M outside the embeddings" in line, line
    assert choice.to_dict()["sizes"][0]["tokens_per_s"] is None  # below the anchor that qualified: not measured
    with pytest.raises(ValueError, match="cpu-fixed"):
        S.size_for_machine(C.preset_config("cpu", steps=10), [], 4000, "cpu")


def test_a_probe_that_reads_a_smaller_model_slower_takes_the_larger_ones_speed(monkeypatch):
    # issue 28's run: width 192 measured 5.1k tok/s, width 256 5.4k. Taken at its word, the slower reading can push the
    # choice below a size the faster one qualifies; the rule must treat the larger model's speed as the floor
    noisy = {320: 1500.0, 256: 5400.0, 192: 5100.0, 128: 9000.0}
    monkeypatch.setattr(S, "measure_speed", lambda cfg, *a, **k: noisy[cfg.d_model])
    params = MACHINE_B_PARAMS
    # 5,250 tok/s would give width 192 exactly the threshold's tokens per parameter
    minutes = S.MIN_TOKENS_PER_PARAMETER * params[1] / (5250.0 * 60)
    choice = S.size_for_machine(C.preset_config("cpu", minutes=minutes), [], 4000, "cpu")
    assert choice.cfg.d_model == 192  # with 5.1k it would have fallen to 160
    at_192 = choice.sizes[3]
    assert at_192["d_model"] == 192 and at_192["tokens_per_s"] == 5400.0 and at_192["measured_tokens_per_s"] == 5100.0


def test_with_8000_pieces_width_192_is_kept_and_nothing_smaller_is_measured(monkeypatch):
    # today's preset on machine C (5,552 target tok/s at width 192 in its 15-minute run): 2.8 tokens per non-embedding
    # parameter qualifies it (width 224, 4.7k interpolated, would see 1.7), while every parameter counted (1.5) would
    # not; a rule that counted the tables anywhere, in the early stop or in the choice, would measure width 128
    measured = []
    speeds = {320: 1500.0, 256: 4000.0, 192: 5552.0, 128: 9000.0}

    def fake_speed(cfg, examples, vocab_size, device, seconds=3.0):
        measured.append(cfg.d_model)
        return speeds[cfg.d_model]

    monkeypatch.setattr(S, "measure_speed", fake_speed)
    cfg = C.preset_config("cpu", minutes=15.0)
    assert cfg.vocab_size == 8000 and cfg.activation == "relu2"  # the preset holds issue 28's winners
    choice = S.size_for_machine(cfg, [], cfg.vocab_size, "cpu")
    assert measured == [320, 256, 192] and choice.cfg.d_model == 192
    # 3,315,840 with rotary positions: the 3,334,272 of learned ones less their 96 x 192 table
    assert choice.sizes[3]["parameters"] == 3_315_840 and choice.sizes[3]["non_embedding"] == 1_779_840


def test_the_probe_reads_the_median_pass_after_an_untimed_one(monkeypatch):
    # a pause of the machine during one pass must not move the reading: the median pass counts, and the first pass
    # over the batches (every shape's first use) is not timed at all; passes go on until three and `seconds`
    pass_seconds = iter([9.0, 2.0, 0.5, 0.6, 0.55, 0.7])  # the untimed pass, then a pass slowed by a pause
    calls = []

    def fake_train(model, batches, valid, cfg, out, **kw):
        calls.append(cfg.steps)
        return SimpleNamespace(tokens=1000 * len(batches), steps=len(batches), train_seconds=next(pass_seconds))

    monkeypatch.setattr(S, "train", fake_train)
    examples = [Example([1, 5, 2, 6, 3], prefix_len=3)] * 400
    k = len(list(islice(S.BucketBatcher(examples, 512, seed=0), S.PROBE_BATCHES)))
    probe = S._probe(C.preset_config("tiny"), examples, 60, "cpu", seconds=3.5)
    assert calls == [k] * 5 and probe.passes == 4  # 2.0 + 0.5 + 0.6 < 3.5 s: a fourth pass (0.55)
    assert probe.tokens_per_s == pytest.approx(1000 * k / 0.6)  # paces 1/2.0, 1/0.6, 1/0.55, 1/0.5: the lower middle
    assert probe.steps_per_s == pytest.approx(k / 0.6)
    # a mean of the passes (the pause included), or the fastest pass, reads otherwise
    assert probe.tokens_per_s != pytest.approx(1000 * k * 4 / 3.65) and probe.tokens_per_s != 1000 * k / 0.5


def test_measure_speed_times_the_real_training_step():
    cfg = C.preset_config("tiny")
    # <bos> source <sep> target <eos>, sources and targets of 2 to 8 tokens
    examples = [Example([1, *range(4, 4 + k), 2, *range(20, 20 + k), 3], prefix_len=k + 2) for k in range(2, 9)] * 20
    small = S.measure_speed(cfg, examples, 60, "cpu", seconds=0.3)
    big = S.measure_speed(S.sized(cfg, 2, 256), examples, 60, "cpu", seconds=0.3)
    assert 0 < big < small  # a 64x larger model trains fewer tokens per second


@pytest.mark.training
def test_train_command_sizes_the_cpu_preset_and_keeps_the_size_on_resume(tmp_path, monkeypatch, capsys):
    from helpers.cli import train_command

    calls = []

    def fake_speed(cfg, examples, vocab_size, device, seconds=3.0):
        calls.append(cfg.d_model)
        assert len(examples) > 0
        return 1e7 if cfg.d_model == 128 else 1.0  # only the smallest is fast enough (144, interpolated, is not)

    monkeypatch.setattr(S, "measure_speed", fake_speed)
    args = {"minutes": 0.02, "preset": "cpu", "limit": 300, "stderr": sys.stderr}
    overrides = {"max_tokens": 256, "valid_sentences": 8}
    train_command("builtin", out=tmp_path / "run", overrides=overrides, **args)
    saved = ck.load_checkpoint(tmp_path / "run")["config"]["model"]
    assert (saved["n_layer"], saved["d_model"]) == (4, 128) and calls == [320, 256, 192, 128]
    assert "Sized for this machine" in capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["sizing"]["chosen"] == 0 and summary["config"]["d_model"] == 128
    # a resumed run keeps its size without measuring again (a new choice would be refused by the checkpoint)
    calls.clear()
    train_command("builtin", out=tmp_path / "run", overrides=overrides, **{**args, "minutes": 0.04})
    assert calls == [] and "as chosen when this run started" in capsys.readouterr().err
    # a fixed preset or an explicit width is never re-sized
    train_command("builtin", out=tmp_path / "fixed", overrides=overrides, **{**args, "preset": "cpu-fixed"})
    train_command("builtin", out=tmp_path / "wide", overrides={**overrides, "d_model": 64}, **args)
    assert calls == []
    assert ck.load_checkpoint(tmp_path / "fixed")["config"]["model"]["d_model"] == 192


@pytest.mark.training
def test_loss_against_time_trains_each_size_from_scratch_and_records_its_curve():
    from helpers.text.batches import BucketBatcher

    cfg = C.preset_config("tiny")
    examples = [Example([1, *range(4, 4 + k), 2, *range(20, 20 + k), 3], prefix_len=k + 2) for k in range(2, 9)] * 20
    valid = list(BucketBatcher(examples[:14], 256, shuffle=False))
    cfg = replace(cfg, warmup_steps=10_000)  # a preset's warm-up longer than the run: must not be kept
    rows = S.loss_against_time(cfg, [(1, 16), (2, 48)], examples, valid, 60, "cpu", seconds=1.5, progress=False)
    assert [(r["n_layer"], r["d_model"]) for r in rows] == [(1, 16), (2, 48)]
    assert rows[0]["parameters"] < rows[1]["parameters"]
    for r in rows:
        curve = r["curve"]
        # a fresh model starts near uniform guessing over 60 tokens (a model carried over would start lower)
        assert curve[0]["minutes"] == 0 and abs(curve[0]["val_loss"] - math.log(60)) < 0.6, curve[0]
        assert len(curve) >= 4, f"the probe should space about 8 evaluations over the run: {curve}"
        assert [p["minutes"] for p in curve] == sorted(p["minutes"] for p in curve)
        assert curve[-1]["minutes"] <= 1.5 / 60 * 1.5 and curve[-1]["val_loss"] < curve[0]["val_loss"] - 0.3
        # every size warms up over the same share of its own run (a tenth of the steps the probe predicted; the run
        # may take fewer on a busy machine: 21 of 181 seen beside another test worker) and reaches the peak rate;
        # the preset's 10,000-step warm-up kept would fail both
        assert r["warmup_steps"] <= 0.2 * r["steps"] + 1, r
        assert r["peak_lr"] > 0.9 * cfg.lr, f"width {r['d_model']} never left its warm-up: {r}"
    with pytest.raises(ValueError, match="validation batches"):
        S.loss_against_time(cfg, [(1, 16)], examples, [], 60, "cpu", seconds=1.0)


def test_loss_against_time_moves_each_model_to_the_device_before_its_first_evaluation(monkeypatch):
    # Found on a GPU: the minute-0 loss ran on a model still on the CPU with batches on CUDA. Here "meta" stands in
    # for a device other than the one modules are built on; the probe and the evaluation are spies.

    seen = []

    class Seen(Exception):
        pass

    def first_evaluation(model, batches, device, precision):
        seen.append((next(model.parameters()).device, torch.device(device)))
        raise Seen

    monkeypatch.setattr(S, "_probe", lambda *a, **k: S.Probe(tokens_per_s=100.0, steps_per_s=10.0, passes=3))
    monkeypatch.setattr(S, "evaluate_loss", first_evaluation)
    with pytest.raises(Seen):
        S.loss_against_time(C.preset_config("tiny"), [(1, 16)], [], [object()], 60, "meta", seconds=1.0)
    assert seen and seen[0][0] == seen[0][1], f"the model is on {seen[0][0]}, its batches go to {seen[0][1]}"


def test_saved_curves_are_reused_only_for_the_same_hardware_sizes_and_seconds(tmp_path):
    key = {"hardware": "2-core CPU", "shapes": [(1, 16), (2, 32)], "seconds": 60, "preset": "cpu"}
    curves = [{"n_layer": 1, "d_model": 16, "curve": [{"minutes": 0.0, "tokens": 0, "val_loss": 4.1}]}]
    path = tmp_path / "size_curves.json"
    assert S.read_curves(path, key) is None  # nothing measured yet
    S.write_curves(path, key, curves)
    assert S.read_curves(path, key) == curves  # tuples and lists alike: the key goes through JSON both ways
    for change in ({"hardware": "Tesla T4"}, {"shapes": [(1, 16)]}, {"seconds": 6}, {"preset": "t4"}):
        assert S.read_curves(path, {**key, **change}) is None, f"curves reused despite {change}"
    path.write_text("{not json")
    assert S.read_curves(path, key) is None  # a half-written file from an old version is measured again

#!/usr/bin/env bash
# Issue 51, item 3: the rates of today's recipe that were never swept, then a few levers beyond them (vocabulary, rotary
# positions, depth), screened at a fixed step budget. Each row is one switch of `train --preset cpu-fixed` (Muon +
# AdamW, warm-up-stable-decay, ReLU², 8,000 pieces, width 192) for a fixed number of steps (default 2,000, about a
# third of a 15-minute bf16 run), then greedy BLEU on the development
# half of the newer Tatoeba sentences. A step budget makes a run exactly reproducible whatever else the cores do, so
# it can run beside other work (one thread, niced); its speed figures are then not speeds.
#   bash benchmarks/recipe_levers_dev.sh NAME SEED [STEPS]     e.g. bash benchmarks/recipe_levers_dev.sh ls0 0
#   python benchmarks/table_levers.py --runs runs/rscr --base base    the table (paired bootstrap against base)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
PY=${PY:-.venv/bin/python}
# The defaults moved once during the sweep (Muon's rate 1.0 -> 0.7 x lr, 5133de2): since then `mlr0.7` is `base`, and
# every row without --muon-lr-scale runs Muon at 0.7 x its lr; the first pass (RESULTS.md) ran them at 1.0 x (eaae6aa).
# The 1 - sqrt cool-down (`--cooldown-shape sqrt`) is deleted: `git checkout 6ee5a87` still runs it (at 0.7 x).
# Rotary positions became the default after the ninth session (notebook 02's model): `base` trains them since, and
# every row of RESULTS.md before that (base07 included) ran learned positions, today's `learned` row.
declare -A ARGS=(
  [base]=""
  [learned]="--positions learned"
  [lr1.4]="--lr 1.4e-3"
  [lr3]="--lr 3e-3"
  [ls0]="--label-smoothing 0"
  [ls0.05]="--label-smoothing 0.05"
  [cd0.3]="--cooldown 0.3"
  [cd0.6]="--cooldown 0.6"
  [mlr1.5]="--muon-lr-scale 1.5"
  [mlr0.7]="--muon-lr-scale 0.7"
  [mlr0.5]="--muon-lr-scale 0.5"
  [mlr1]="--muon-lr-scale 1"  # the rate before 0.7 won on learned positions; on rotary ones again (eleventh session)
  # AdamW's rate (embeddings, head, norms, biases) moved with Muon's held at 1.4e-3 (today's 0.7 x 2e-3); adam1.4
  # is the first pass's lr1.4 (both rates 1.4e-3), run again: the same translations
  [adam3]="--lr 3e-3 --muon-lr-scale 0.4667"
  [adam1.4]="--lr 1.4e-3 --muon-lr-scale 1"
  # beyond the rates (the fourth session of the sweep): a larger vocabulary, now that the output layer runs at the
  # target positions alone (a fixed step budget favours it: fewer pieces per sentence, more sentences per step, so a
  # win here must hold at 15 minutes), and rotary positions (not measured on the development set before)
  [vocab12k]="--vocab-size 12000"
  [vocab16k]="--vocab-size 16000"
  [rotary]="--positions rotary"  # today's base since (bit for bit)
  # notebook 02's own fixed sinusoidal table instead of the learned one (ninth session): would a table that needs no
  # training reach rotary's gain on long sentences inside notebook 02's model? It tied, and not there (RESULTS.md)
  [sinusoidal]="--positions sinusoidal"
  # the schedule's floor, the weight decay and the warm-up, never swept (ninth session): WSD usually cools down to
  # zero, here to 5 % of the peak; the decay (0.05) acts on Muon's matrices. `train` has no switch for them:
  # field=value through train_shape.py
  [minlr0]="min_lr_ratio=0"
  [wd0]="weight_decay=0"
  [wd0.1]="weight_decay=0.1"
  [wd0.2]="weight_decay=0.2"
  [warm50]="warmup_steps=50"
  [warm400]="warmup_steps=400"
  # made-up names in place of the names a pair's two sides share (Tom, Boston), `--name-swap 0.5` and `1` (rows
  # names0.5, names1): the newer sentences name people the training file never does. They lost and were deleted:
  # `git checkout 4eb61fb && bash benchmarks/recipe_levers_dev.sh names0.5 0` runs them (names1 was added after it:
  # the same flag with 1)
  # depth against width at about the same parameters outside the embeddings (4 x 192: 1.77 M): `train` has no shape
  # switch, so these go through benchmarks/train_shape.py
  [L6w160]="n_layer=6 d_model=160 n_head=4"
  [L3w224]="n_layer=3 d_model=224 n_head=4"
  # on rotary positions (the eleventh session): how many heads share width 192 (4 of 48 today; 3 of 64, 6 of 32),
  # and the rotation's speeds (a base of 1,000 instead of RoPE's 10,000: of a head of 48's 24 pairs, about 11 turn
  # less than half a radian over 60 positions at 10,000, 7 at 1,000)
  [h3]="n_head=3"
  [h6]="n_head=6"
  [rope1k]="rotary_base=1000"
  # regularisation, on rotary positions: label smoothing rose with its share in the first passes (0: -0.38, 0.05:
  # -0.11 against 0.1), so a larger share; and dropout, off since issue 5 (two or three passes over Tatoeba)
  [ls0.2]="--label-smoothing 0.2"
  [drop0.1]="--dropout 0.1"
  # the t4 preset (dropout 0.1) lost 2.9 BLEU with rotary positions against learned ones on an H100 (twelfth
  # session): does dropout cost rotary positions more than learned ones? (drop0.1 above is on rotary ones)
  [learned-drop0.1]="--positions learned --dropout 0.1"
  # the t4 preset's rates on the cpu preset's shape (peak 1e-3, a 1,000-step warm-up, weight decay 0.1), rotary
  # against learned positions: do the rates, rather than the size, turn rotary's sign?
  [t4rates]="lr=0.001 warmup_steps=1000 weight_decay=0.1"
  [t4rates-learned]="lr=0.001 warmup_steps=1000 weight_decay=0.1 positional=learned"
  # the tokenizer: sentencepiece BPE instead of the unigram model, at the same 8,000 pieces (thirteenth session: lost)
  [bpe]="tokenizer_type=bpe"
)
name=$1 seed=$2 steps=${3:-2000}
[ -n "${ARGS[$name]+x}" ] || { echo "unknown lever $name: one of ${!ARGS[*]}" >&2; exit 2; }
mkdir -p runs/rscr
out=runs/rscr/$name-s$seed
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
if [[ ${ARGS[$name]} == *=* && ${ARGS[$name]} != --* ]]; then  # field=value pairs for train_command's overrides
  # shellcheck disable=SC2086
  $PY benchmarks/train_shape.py --data "$DATA" --preset cpu-fixed --seed "$seed" --steps "$steps" --out "$out" \
    ${ARGS[$name]} >"$out.train.log" 2>&1
else
  # shellcheck disable=SC2086
  $PY -m helpers train --data "$DATA" --preset cpu-fixed --seed "$seed" --steps "$steps" --out "$out" ${ARGS[$name]} \
    >"$out.train.log" 2>&1
fi
$PY -m helpers evaluate --checkpoint "$out" --beams 1 --test tatoeba-newer-dev --json "$out/eval_dev_greedy.json" \
  >"$out.eval.log" 2>&1
grep -o 'BLEU = [0-9.]*' "$out.eval.log" | head -1

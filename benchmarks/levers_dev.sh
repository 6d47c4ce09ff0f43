#!/usr/bin/env bash
# Issue 28's lever screen: each lever is one switch of `train --preset cpu-fixed --optimizer adamw --schedule cosine --vocab-size 4000 --activation gelu --positions learned` (the preset before issue 28, and its positions) for a fixed number of steps
# (3,000 = about a third of the 15-minute bf16 run), two seeds, then greedy BLEU on the newer-sentence
# development set. A step budget makes every run exactly reproducible and independent of what else the cores
# do, so two runs go side by side, one thread each (speed is measured apart: benchmarks/RESULTS.md).
#   bash benchmarks/levers_dev.sh NAME SEED [STEPS]      e.g. bash benchmarks/levers_dev.sh muon 0
#   python benchmarks/table_levers.py                     the table, with the paired bootstrap against vanilla
# The subword, ema and concat rows (subword regularisation, a moving average of the weights, joined pairs) were
# deleted with their levers; this script at commit a224218 still runs them (git checkout a224218).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
DEV=${DEV:-../shared/data/tatoeba-newer-fr-en/dev.fr-en.tsv}
PY=${PY:-.venv/bin/python}
declare -A ARGS=(
  [vanilla]=""
  [span]="--pretrain span"
  [synth]="--attention synthesizer"
  [muon]="--optimizer muon"
  [wsd]="--schedule wsd"
  [qknorm]="--qk-norm 1"
  [relu2]="--activation relu2"
  [zeroinit]="--zero-init 1"
  [untied]="--tie-weights 0"
  [vocab2k]="--vocab-size 2000"
  [vocab8k]="--vocab-size 8000"
  [span-muon-wsd]="--pretrain span --optimizer muon --schedule wsd"
)
name=$1 seed=$2 steps=${3:-3000}
[ -n "${ARGS[$name]+x}" ] || { echo "unknown lever $name: one of ${!ARGS[*]}" >&2; exit 2; }
out=runs/scr/$name-s$seed
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# shellcheck disable=SC2086
$PY -m helpers train --data "$DATA" --preset cpu-fixed --seed "$seed" --steps "$steps" --out "$out" --optimizer adamw --schedule cosine --vocab-size 4000 --activation gelu --positions learned ${ARGS[$name]} >"$out.train.log" 2>&1
$PY -m helpers evaluate --checkpoint "$out" --beams 1 --test "$DEV" --json "$out/eval_dev_greedy.json" >"$out.eval.log" 2>&1
grep -o 'BLEU = [0-9.]*' "$out.eval.log" | head -1

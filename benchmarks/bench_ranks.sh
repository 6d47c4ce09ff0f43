#!/usr/bin/env bash
# Issue 29: target tokens per second of the same training run in 1 process and under torchrun in 2 (gloo, CPU), on
# an otherwise idle machine, one after the other. The same global batch, steps and data; train_summary.json holds
# the speed of the training steps alone (data preparation and evaluation excluded).
#   bash benchmarks/bench_ranks.sh [PRESET] [STEPS]          default: cpu-fixed 300
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
PY=${PY:-.venv/bin/python}
preset=${1:-cpu-fixed} steps=${2:-300}
args=(train --data "$DATA" --preset "$preset" --steps "$steps")  # DATA=builtin: no dev scoring at the end
rm -rf runs/ranks
$PY -m helpers "${args[@]}" --out runs/ranks/one >/dev/null 2>&1
$PY -m torch.distributed.run --standalone --nproc_per_node=2 -m helpers "${args[@]}" --out runs/ranks/two >/dev/null 2>&1
for n in one two; do
  $PY -c "import json; s = json.load(open('runs/ranks/$n/train_summary.json')); print('$n process(es):', s['steps'], 'steps,', s['tokens_per_s'], 'target tok/s, val loss', round(s['val_loss'], 4))"
done

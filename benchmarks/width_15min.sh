#!/usr/bin/env bash
# Issue 51, item 2: is the sizing rule's width within seed noise of its neighbours? The same 15-minute run as
# benchmarks/recipe_15min.sh (`train --preset cpu`: today's preset as it is, bf16 where the CPU has it), with the
# width fixed instead of chosen (a shape field in train's overrides skips the probe; the heads are the grid's,
# sizing.CPU_SIZES), then beam 4 on the development half of the newer Tatoeba sentences. One run at a time,
# nothing else on the cores. Unlike benchmarks/sizing_dev.sh (issue 28: one run per width, the preset of that time
# by default, runs/size) it takes seeds and writes runs/recipe/w<WIDTH>-bf16-seed<S>, beside the rule's own runs,
# for benchmarks/table_recipe.py.
# Usage: bash benchmarks/width_15min.sh WIDTH [SEED ...]    (default seeds 0 1), e.g. bash benchmarks/width_15min.sh 192 0 1
#        python benchmarks/table_recipe.py runs/recipe
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
PY=${PY:-.venv/bin/python}
MINUTES=${MINUTES:-15}
width=${1:-}
[[ $width =~ ^[0-9]+$ ]] || { echo "usage: bash benchmarks/width_15min.sh WIDTH [SEED ...], e.g. 192 0 1" >&2; exit 2; }
shift
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(0 1)
mkdir -p runs/recipe
for seed in "${seeds[@]}"; do
  out=runs/recipe/w$width-bf16-seed$seed
  echo "=== width $width seed $seed: train ($(date -u +%H:%M:%S))"
  DATA="$DATA" OUT="$out" WIDTH="$width" SEED="$seed" MINUTES="$MINUTES" $PY -c "import os
from helpers.commands import train_command
from helpers.training.sizing import CPU_SIZES
w = int(os.environ['WIDTH'])
heads = {d: h for _, d, h in CPU_SIZES}.get(w, 4)
train_command(data=os.environ['DATA'], minutes=float(os.environ['MINUTES']), out=os.environ['OUT'], preset='cpu',
              seed=int(os.environ['SEED']), overrides={'d_model': w, 'n_head': heads})" > "$out.train.log" 2>&1 ||
    { tail -n 20 "$out.train.log"; exit 1; }
  grep -E "^Model|^Done" "$out.train.log" || true
  echo "=== width $width seed $seed: evaluate, beam 4, newer sentences ($(date -u +%H:%M:%S))"
  $PY -m helpers evaluate --checkpoint "$out" --test tatoeba-newer-dev --json "$out/eval_newer_dev.json" \
    > "$out.eval.log" 2>&1 || { tail -n 20 "$out.eval.log"; exit 1; }
  grep -m 3 -E "BLEU" "$out.eval.log" || true
done
echo "=== all done ($(date -u +%H:%M:%S))"

#!/usr/bin/env bash
# Issue 28: the sizing rule re-checked on the newer-sentence development set. The cpu preset (Muon + WSD, bf16 where
# native) for 15 minutes at a fixed width, one run at a time on an otherwise idle machine (a time budget: the
# speed is the point), then the dev set scored with evaluate's default (beam 4); train prints greedy at the end.
#   bash benchmarks/sizing_dev.sh 128 256        the widths to run (192 is runs/final/bf16, the sized run)
# The RESULTS.md table was measured with the preset of the time, 4,000 pieces and GELU (the defaults below);
# VOCAB=8000 ACT=relu2 runs today's preset; TAG names the run folder apart (runs/size/w<width><TAG>).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
PY=${PY:-.venv/bin/python}
VOCAB=${VOCAB:-4000} ACT=${ACT:-gelu}
for width in "$@"; do
  out=runs/size/w$width${TAG:-}
  echo "=== width $width: train ($(date -u +%H:%M:%S))"
  $PY -c "from helpers.commands import train_command
train_command('$DATA', minutes=15, out='$out', preset='cpu', overrides={'n_layer': 4, 'd_model': $width, 'd_ff': 4 * $width, 'vocab_size': $VOCAB, 'activation': '$ACT'},
              progress=False)" 2>&1 | tail -n 4
  echo "=== width $width: evaluate, beam 4 ($(date -u +%H:%M:%S))"
  # the whole output to a file first: grep -m1 on a pipe would stop evaluate before it writes its JSON
  $PY -m helpers evaluate --checkpoint "$out" --test tatoeba-newer-dev --json "$out/eval_dev.json" >"$out.eval.log" 2>&1
  grep -m1 "BLEU =" "$out.eval.log"
done

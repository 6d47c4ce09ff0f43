#!/usr/bin/env bash
# Issue 51: the 15-minute headline as a recipe, not a run: `train --preset cpu` with several seeds, each then scored
# with beam 4 on the development half of the newer Tatoeba sentences. One run at a time, nothing else on the cores.
# Usage: bash benchmarks/recipe_15min.sh [bf16|fp32] [SEED ...]   (default: bf16, seeds 0 1 2); then
#        python benchmarks/table_recipe.py runs/recipe
# Today's defaults train rotary positions; the rows of RESULTS.md before that ran learned ones (EXTRA="--positions
#        learned" reruns base and mlr0.7; the w* rows ran learned positions through train_shape.py, which now trains
#        rotary ones). The rotary rows (EXTRA="--positions rotary") are today's defaults, bit for bit.
# A lever at 15 minutes: EXTRA="--muon-lr-scale 0.7" TAG=mlr0.7 bash benchmarks/recipe_15min.sh bf16 0 1
#        (runs/recipe/mlr0.7-bf16-seed0, ...; the train flags in EXTRA, the folder names prefixed by TAG)
# A width fixed instead of chosen (item 2: the rule's choice against its neighbours): WIDTH=192 bash
#        benchmarks/recipe_15min.sh bf16 0 1 (runs/recipe/w192-bf16-seed0, ...; benchmarks/train_shape.py: a shape
#        field in train's overrides skips the probe; the heads are the grid's; EXTRA is not taken with WIDTH)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
PY=${PY:-.venv/bin/python}
MINUTES=${MINUTES:-15}
precision=${1:-bf16}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2)
case $precision in
  bf16) flag="" ;;  # the preset's own: bf16 where the CPU has the instructions
  fp32) flag="--precision fp32" ;;  # stands in for a CPU without them
  *) echo "precision must be bf16 or fp32, got $precision" >&2; exit 2 ;;
esac
WIDTH=${WIDTH:-}
if [ -n "$WIDTH" ]; then
  [[ $WIDTH =~ ^[0-9]+$ && -z ${EXTRA:-} ]] || { echo "WIDTH must be a number, without EXTRA; got '$WIDTH'" >&2; exit 2; }
  TAG=${TAG:-w$WIDTH}
fi
mkdir -p runs/recipe
for seed in "${seeds[@]}"; do
  out=runs/recipe/${TAG:+$TAG-}$precision-seed$seed
  echo "=== $precision seed $seed${WIDTH:+, width $WIDTH}: train ($(date -u +%H:%M:%S))"
  if [ -n "$WIDTH" ]; then
    # shellcheck disable=SC2086
    $PY benchmarks/train_shape.py --data "$DATA" --minutes "$MINUTES" --preset cpu --seed "$seed" --out "$out" \
      --width "$WIDTH" $flag > "$out.train.log" 2>&1 || { tail -n 20 "$out.train.log"; exit 1; }
  else
    # shellcheck disable=SC2086
    $PY -m helpers train --data "$DATA" --minutes "$MINUTES" --preset cpu --seed "$seed" --out "$out" $flag ${EXTRA:-} \
      > "$out.train.log" 2>&1 || { tail -n 20 "$out.train.log"; exit 1; }
  fi
  grep -E "^Sized|^Model|^Done" "$out.train.log" || true
  echo "=== $precision seed $seed: evaluate, beam 4, newer sentences ($(date -u +%H:%M:%S))"
  $PY -m helpers evaluate --checkpoint "$out" --test tatoeba-newer-dev --json "$out/eval_newer_dev.json" \
    > "$out.eval.log" 2>&1 || { tail -n 20 "$out.eval.log"; exit 1; }
  grep -m 3 -E "BLEU" "$out.eval.log" || true
done
echo "=== all done ($(date -u +%H:%M:%S))"

#!/usr/bin/env bash
# The 15-minute CPU runs of benchmarks/RESULTS.md (issues 13 and 14), one after another, never two at once:
# each trains on the shared Tatoeba file with the same seed and split, then is scored greedy on the run's own
# new-sentence and in-distribution sets. Usage: bash benchmarks/runs_15min.sh [NAME ...] (default: all).
# Learned positions, the default of those runs (rotary positions are since issue 51), unless a row names others.
#   fixed        --preset cpu-fixed            the vanilla reference (4 layers, width 192)
#   sized        --preset cpu                  sized for this machine and budget (issue 14)
#   sized-fp32   --preset cpu --precision fp32 the same, fp32 forced: stands in for a CPU without bf16
#   synthesizer, bottleneck, rotary, alibi, nopos, span: notebook 05's variants on the fixed size (issue 13)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
PY=${PY:-.venv/bin/python}
MINUTES=${MINUTES:-15}
declare -A ARGS=(
  [fixed]="--preset cpu-fixed"
  [sized]="--preset cpu"
  [sized-fp32]="--preset cpu --precision fp32"
  [synthesizer]="--preset cpu-fixed --attention synthesizer"
  [bottleneck]="--preset cpu-fixed --bottleneck-dim 16"
  [rotary]="--preset cpu-fixed --positions rotary"
  [alibi]="--preset cpu-fixed --positions alibi"
  [nopos]="--preset cpu-fixed --positions none"
  [span]="--preset cpu-fixed --pretrain span"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(fixed sized-fp32 sized synthesizer bottleneck rotary span alibi nopos)
for name in "${names[@]}"; do
  [ -n "${ARGS[$name]+x}" ] || { echo "unknown run $name: one of ${!ARGS[*]}" >&2; exit 2; }
  out=runs/15min/$name
  echo "=== $name: train ${ARGS[$name]} ($(date -u +%H:%M:%S))"
  # shellcheck disable=SC2086
  $PY -m helpers train --data "$DATA" --minutes "$MINUTES" --out "$out" --positions learned ${ARGS[$name]} 2>&1 | grep -v '^\s*$' | tail -n 25
  echo "=== $name: evaluate greedy ($(date -u +%H:%M:%S))"
  $PY -m helpers evaluate --checkpoint "$out" --beams 1 --json "$out/eval_greedy.json" 2>&1 | tail -n 30
done
echo "=== all done ($(date -u +%H:%M:%S))"

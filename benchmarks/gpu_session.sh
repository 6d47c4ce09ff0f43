#!/usr/bin/env bash
# The GPU measurements of issues 38 and 40 in one call, for a lent GPU machine with about 10 minutes of it:
# the matmul peaks, the T4's code path (fp16 + GradScaler) on the `t4` preset, Trainer and torchrun starting on
# CUDA, then the compiled step last (its compile time is the least predictable part).
#
#   DATA=/path/with/fra.txt+dev.fr-en.tsv OUT=/where/results/go TRAIN_MINUTES=4 bash benchmarks/gpu_session.sh
#   PARTS=extras bash benchmarks/gpu_session.sh     # one part only (main, extras), e.g. in a second call
#   PARTS=run TRAIN_COMPILE=1 ...; PARTS=bench ...  # the parts of main: a timed run alone; eager against compiled
#
# Each step has its own time limit, so one that hangs costs its limit and not the rest. Results go to $OUT:
# *.json from the benchmarks, eval-*.json from evaluate, train_summary.json, and session.log (everything printed).
# The machine's own python3 and packages are used (torch 2.11 with CUDA there); nothing is installed.
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-.gpu}
OUT=${OUT:-reports/gpu}
TRAIN_MINUTES=${TRAIN_MINUTES:-4}
TRAIN_LIMIT=${TRAIN_LIMIT:-$((TRAIN_MINUTES * 60 + 150))}  # data, tokenizer and the dev score around the budget
PRESET=${PRESET:-t4}  # PRESET=tiny TRAIN_MINUTES=0.3 TRAIN_LIMIT=200: a dry run of this script on a CPU
RUN=runs/gpu-$PRESET
rm -rf runs/ft16 runs/ddp1 runs/tiny-marian  # a fresh run each time (train and finetune would resume old ones)
PARTS=${PARTS:-main extras}
if [[ " $PARTS " == *" main "* || " $PARTS " == *" run "* ]]; then rm -rf "$RUN"; fi
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TATOEBA_PATH="$DATA/fra.txt" TATOEBA_NEWER_DEV="$DATA/dev.fr-en.tsv" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
start=$(date +%s)
step() {  # step NAME LIMIT_SECONDS COMMAND...: run one measurement, say how long it took and how it ended
  local name=$1 limit=$2
  shift 2
  local t0
  t0=$(date +%s)
  echo "=== $name (limit ${limit}s, at +$((t0 - start))s)"
  timeout "$limit" "$@"
  echo "=== $name: exit $? after $(($(date +%s) - t0))s"
}
run() {  # the t4 preset trained for TRAIN_MINUTES (TRAIN_COMPILE=1: the compiled step), scored on the newer sentences
  step train "$TRAIN_LIMIT" $PY -m helpers train --preset "$PRESET" --precision fp16 --minutes "$TRAIN_MINUTES" \
    --compile "${TRAIN_COMPILE:-0}" --data "$DATA/fra.txt" --out "$RUN"
  cp "$RUN"/train_summary.json "$OUT/" 2>/dev/null
  step evaluate-newer 90 $PY -m helpers evaluate --checkpoint "$RUN" --test tatoeba-newer-dev --beams 4 \
    --json "$OUT/eval-newer.json"
}
bench() {  # the training step's throughput, eager ("ours") and compiled, on the same sampled sentences
  step compiled "${COMPILE_LIMIT:-150}" $PY benchmarks/bench_train.py --data tatoeba --preset "$PRESET" --precision fp16 \
    --steps 60 --compile --skip-naive --json "$OUT/bench_train_compiled.json"
}
main() {  # the matmul peaks, the throughput benchmark, the t4 run and its scores, then the compiled step
  step matmul 90 $PY benchmarks/bench_matmul.py
  step bench_train 120 $PY benchmarks/bench_train.py --data tatoeba --preset "$PRESET" --precision fp16 --steps 60 \
    --json "$OUT/bench_train.json"
  run
  step evaluate-own 120 $PY -m helpers evaluate --checkpoint "$RUN" --beams 4 --json "$OUT/eval-own.json"
  step activations 60 $PY benchmarks/probe_activations.py --checkpoint "$RUN" --precision fp16 \
    --json "$OUT/activations.json"
  step decode 60 $PY benchmarks/bench_decode.py --checkpoint "$RUN"
  step compiled "${COMPILE_LIMIT:-150}" $PY benchmarks/bench_train.py --data tatoeba --preset "$PRESET" --precision fp16 \
    --steps 60 --compile --skip-naive --json "$OUT/bench_train_compiled.json"
}
extras() {  # notebook 04's path (Trainer in fp16 on a tiny stand-in) and the NCCL path of torchrun starting
  step finetune-fp16 150 bash -c "$PY -c \"from helpers.hf.tiny import tiny_marian; from helpers.text.corpus import builtin_corpus; tiny_marian(builtin_corpus(400, seed=1), 'runs/tiny-marian')\" && $PY -m helpers finetune --model runs/tiny-marian --data builtin --limit 2000 --steps 40 --precision fp16 --out runs/ft16 && cp runs/ft16/finetune.json $OUT/"
  step torchrun-1 90 $PY -m torch.distributed.run --standalone --nproc_per_node 1 -m helpers train --data builtin \
    --preset tiny --steps 40 --out runs/ddp1
}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  $PY -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__, '| capability', torch.cuda.get_device_capability())"
  git log -1 --format='commit %H %s' 2>/dev/null || true
  for part in $PARTS; do "$part"; done
  echo "=== all done at +$(($(date +%s) - start))s"
} 2>&1 | tee "$OUT/session-${PARTS// /-}.log"

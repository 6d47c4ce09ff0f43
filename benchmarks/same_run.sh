#!/usr/bin/env bash
# Issue 52, item 7: a refactor must not change what a run computes. Trains `--preset cpu-fixed` for 30 fixed steps
# (seed 0), writes a SHA-256 of every tensor of the checkpoint (model and optimiser state), then translates the
# development half of the newer Tatoeba sentences greedy and with beam 4. Run it before and after a change, then
#   bash benchmarks/same_run.sh OUT_BEFORE; (change); bash benchmarks/same_run.sh OUT_AFTER
#   diff -r --exclude=run --exclude='*.log' OUT_BEFORE OUT_AFTER && echo "bit for bit"
# (each run's own folder, run/, holds paths and times, so it is left out of the comparison.)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/tatoeba-fra-eng/fra.txt}
PY=${PY:-.venv/bin/python}
out=${1:?usage: bash benchmarks/same_run.sh OUT}
mkdir -p "$out"
$PY -m helpers train --data "$DATA" --preset cpu-fixed --seed 0 --steps 30 --out "$out/run" >"$out/train.log" 2>&1
$PY - "$out" <<'PY'
import hashlib, json, sys
import torch
out = sys.argv[1]
ckpt = torch.load(f"{out}/run/checkpoint.pt", map_location="cpu", weights_only=False)
def walk(x, name, acc):
    if isinstance(x, torch.Tensor):
        acc[name] = hashlib.sha256(x.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
    elif isinstance(x, dict):
        for k, v in x.items():
            walk(v, f"{name}.{k}", acc)
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            walk(v, f"{name}[{i}]", acc)
    return acc
hashes = {part: walk(ckpt[part], part, {}) for part in ("model", "optimizer") if part in ckpt}
json.dump(hashes, open(f"{out}/tensors.json", "w"), indent=1, sort_keys=True)
print(f"{sum(len(h) for h in hashes.values())} tensors hashed")
PY
for beams in 1 4; do
  $PY -m helpers evaluate --checkpoint "$out/run" --beams $beams --test tatoeba-newer-dev --json "$out/run/eval_b$beams.json" \
    >"$out/eval_b$beams.log" 2>&1
  cp "$out/run/eval_b$beams.tatoeba-newer-dev.hyp.txt" "$out/translations_b$beams.txt"
  grep -o 'BLEU = [0-9.]*' "$out/eval_b$beams.log" | head -1
done

"""`train` at a fixed model shape: `python -m helpers train` has no shape switch (the `cpu` preset sizes the model for
the machine), so the benchmarks that fix one call ``train_command`` with the shape in its overrides, which also
skips the sizing probe. Shared by recipe_15min.sh (WIDTH=) and recipe_levers_dev.sh (the L<layers>w<width> rows).

    python benchmarks/train_shape.py --data F --out DIR --seed S (--steps N | --minutes M) [--preset cpu]
                                     [--precision fp32] [--width W] [FIELD=VALUE ...]

``--width W`` sets d_model with the head count of the sizing grid (``sizing.CPU_SIZES``; 4 heads off the grid);
FIELD=VALUE pairs set fields of the preset (n_layer=6 d_model=160 n_head=4, or min_lr_ratio=0: the fields `train`
has no switch for; positional=learned reruns a row measured before rotary positions became the default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from helpers.commands import train_command  # noqa: E402
from helpers.training.sizing import CPU_SIZES  # noqa: E402


def _number(text: str) -> int | float | str:
    """'6' -> 6, '0.1' -> 0.1: a field keeps its type (n_layer an int, weight_decay a float); other text stays text
    (positional=learned, to rerun a row measured before rotary positions became the default)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--steps", type=int)
    budget.add_argument("--minutes", type=float)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--precision", default=None)
    p.add_argument("--width", type=int, default=None)
    p.add_argument("fields", nargs="*", help="FIELD=VALUE, fields of the preset (numbers, or text such as learned)")
    args = p.parse_args(argv)
    overrides = {k: _number(v) for k, v in (f.split("=", 1) for f in args.fields)}
    if args.width is not None:
        overrides.update(d_model=args.width, n_head={d: h for _, d, h in CPU_SIZES}.get(args.width, 4))
    if args.precision:
        overrides["precision"] = args.precision
    if not overrides:
        p.error("give --width or FIELD=VALUE pairs: without a shape, use python -m helpers train")
    train_command(data=args.data, minutes=args.minutes, steps=args.steps, out=args.out, preset=args.preset,
                  seed=args.seed, overrides=overrides)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

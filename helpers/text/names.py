"""Names the model has never seen: training pairs that share a name get a made-up one, on both sides.

Tatoeba's training file names few people and places: a tenth of its pairs carry a capitalised word that is the
same in French and English, and "Tom" is 14,562 of those 16,507 (Mary 1,478, Boston 615; 532 different words in
all). The sentences people typed later name others (Yanni, Sami, Skura, Ryck Vernaut), and a model that has only
ever seen Tom does not copy a name it does not know: of the 278 unseen capitalised words that the newer sentences'
references keep as they are, a 15-minute model wrote 4, and it often drops the name ("Ann a plusieurs amis." ->
"There are several friends."). So, with ``share`` > 0, that share of the training pairs with a shared name get a
made-up name in its place, the same on both sides, so that copying a name is something the model learns:

    pairs, report = swap_names(train_pairs, share=0.5, seed=0)
    # ("Tom est là.", "Tom is here.") -> ("Bekaro est là.", "Bekaro is here.")

Only the training pairs are changed, once per run (seeded): the tokenizer, the validation and the test sets see the
text as it is. The lever is measured on the development set (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

# a capitalised word of three letters or more (Tom, Boston, Élodie); two-letter interjections (Oh, Ah) are left out
NAME = re.compile(r"\b[A-ZÀ-Ý][a-zà-ÿ]{2,}\b")
_ONSETS = "b c d f g h j k l m n p r s t v z ch br dr gr kr pl st tr".split()
_VOWELS = "a e i o u a e i o ou ai".split()


@dataclass
class NameSwapReport:
    pairs: int = 0  # training pairs looked at
    with_names: int = 0  # of those, pairs whose two sides share a name
    swapped: int = 0  # of those, pairs that got made-up names

    def describe(self) -> str:
        if not self.swapped:
            return f"made-up names: none ({self.with_names:,} of {self.pairs:,} training pairs share a name)"
        return (
            f"made-up names: {self.swapped:,} of the {self.with_names:,} training pairs that share a name (Tom, "
            f"Boston) got a made-up one in its place on both sides ({self.pairs:,} training pairs)"
        )


def shared_names(fr: str, en: str) -> list[str]:
    """The capitalised words written the same on both sides, in the order the English side first has them."""
    french = set(NAME.findall(fr))
    return list(dict.fromkeys(w for w in NAME.findall(en) if w in french))


def made_up_name(rng: random.Random) -> str:
    """A pronounceable name of two or three syllables that is no word of either language, e.g. 'Bekaro'."""
    syllables = rng.choice((2, 2, 3))
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)).capitalize()


def check_share(share) -> None:
    """Refuse a ``name_swap`` that is no share in [0, 1], saying what to give."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
        raise ValueError(
            f"name_swap must be a share of the pairs that share a name, in [0, 1], got {share!r}: 0 turns it off, "
            "0.5 gives half of them made-up names."
        )


def swap_names(
    pairs: Sequence[tuple[str, str]], share: float, seed: int = 0
) -> tuple[list[tuple[str, str]], NameSwapReport]:
    """``pairs`` (French, English) with made-up names in ``share`` of those that share a name; and the counts.

    Every shared name of a chosen pair is replaced, each by a name of its own, the same on both sides; the other
    pairs are returned as they are. ``share`` 0 changes nothing; the choice is fixed by ``seed``."""
    check_share(share)
    rng = random.Random(f"names-{seed}")
    out, report = [], NameSwapReport(pairs=len(pairs))
    for fr, en in pairs:
        names = shared_names(fr, en)
        report.with_names += bool(names)
        if not names or share == 0 or rng.random() >= share:
            out.append((fr, en))
            continue
        new = {name: made_up_name(rng) for name in names}
        out.append((_renamed(fr, new), _renamed(en, new)))
        report.swapped += 1
    return out, report


def _renamed(text: str, new: dict[str, str]) -> str:
    """``text`` with each whole word that is a key of ``new`` replaced by its value."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, new)) + r")\b")
    return pattern.sub(lambda m: new[m.group(1)], text)

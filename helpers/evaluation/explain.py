"""One sentence of your own, translated and taken apart: the function behind notebook 03's text box, notebook 04's
side-by-side row and ``translate --explain`` at the terminal.

:func:`explain_translation` returns what a learner needs to see why an output is wrong: the source as the model's
pieces, the translation, the beam's other candidates with their log-probabilities, the source words no training
pair holds, whether the source was cut to the model's budget (and after which word), the attention of every layer
and head from each output piece to each source piece, and the time it took.
"""

from __future__ import annotations

import re
import textwrap
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..nn.generate import beam_search
from ..text.encoding import max_source_tokens
from ..text.testsets import WORD
from ..text.testsets import words as french_words
from .evaluate import DEFAULT_BEAMS
from .translation import max_new_tokens_for, translate


@dataclass
class Explanation:
    source: str
    translation: str  # what translate() returns for the whole source (pieces of a long one joined)
    pieces: list[str]  # the source as the model read it (after a cut: the part it read)
    alternatives: list[dict]  # the beam's finished candidates, best first: text, tokens, logprob (sum), score
    words: list[tuple[str, bool]]  # each French word of the source, True when no training pair holds it
    cut: dict | None  # None, or tokens (of the whole source), kept, after (the last word read whole)
    output_pieces: list[str]  # the best candidate's pieces, then <eos>
    attention: list[np.ndarray] = field(repr=False)  # per layer (n_head, output pieces, source pieces); rows sum <= 1
    seconds: float = 0.0
    note: str = ""
    piece_unseen: list[bool] = field(
        default_factory=list
    )  # per source piece: part of a word no training pair holds  # what to tell the user about the input (empty, nothing in the vocabulary...)

    @property
    def unseen(self) -> list[str]:
        return [w for w, new in self.words if new]

    def to_text(self) -> str:
        """The explanation in a few lines, for the terminal (``translate --explain``)."""
        lines = [self.translation or "(no translation)"]
        if self.note:
            lines.append(f"  note: {self.note}")
        for i, alt in enumerate(self.alternatives[:5]):
            lines.append(f"  {i + 1}. {alt['text']}   (log-prob {alt['logprob']:.2f}, score {alt['score']:.2f})")
        if self.words:
            lines.append("  unseen in training: " + (", ".join(self.unseen) if self.unseen else "none"))
        if self.cut:
            lines.append(f"  cut: {self.cut['tokens']} pieces, the model read {self.cut['kept']} (up to "
                         f"\"{self.cut['after']}\"); the translation covers the rest in pieces")  # fmt: skip
        lines.append(f"  {len(self.pieces)} source pieces: {' '.join(self.pieces)}   ({self.seconds * 1000:.0f} ms)")
        return "\n".join(lines)


def _candidates(model, prefix: list[int], eos_id: int, beams: int, length_penalty: float) -> list[list[int]]:
    """The tokens of every hypothesis the beam finished, best first."""
    budget = max_new_tokens_for(len(prefix), model.config.max_len)
    return [h.ids for h in beam_search(model, [prefix], budget, eos_id, beams, length_penalty)[0]]


@torch.no_grad()
def _logprob(model, prefix: list[int], tokens: list[int], eos_id: int) -> float:
    """log p(tokens, <eos> | prefix): what the model gives this candidate, token by token."""
    device = next(model.parameters()).device
    seq = torch.tensor([prefix + tokens + [eos_id]], device=device)[:, : model.config.max_len]
    logits = model(seq, torch.tensor([len(prefix)], device=device))  # (1, T, V)
    logp = F.log_softmax(logits[0, len(prefix) - 1 : -1].float(), dim=-1)  # predicts seq[len(prefix):]
    return float(logp.gather(1, seq[0, len(prefix) :, None]).sum())


@torch.no_grad()
def explain_translation(
    model, tokenizer, text: str, beams: int = DEFAULT_BEAMS, word_table=None, length_penalty: float = 1.0
) -> Explanation:
    """Translate ``text`` and say how: pieces, candidates, unseen words (``word_table``: the run's
    :class:`helpers.text.testsets.WordTable`), the cut, attention per layer and head, time. Never raises on text."""
    t0 = time.perf_counter()
    text = (text or "").strip()
    was_training = model.training
    model.eval()
    try:
        flagged = [(w, word_table is not None and w not in word_table) for w in french_words(text)]
        if not text:
            return Explanation("", "", [], [], [], None, [], [], 0.0, note="an empty line: type a French sentence")
        ids = tokenizer.encode(text)
        keep = max_source_tokens(model.config.max_len)
        cut = None
        if len(ids) > keep:  # the analysis reads what fits; translate() below covers the rest in pieces
            read = tokenizer.decode(ids[:keep])
            whole = french_words(read)[:-1] or french_words(read)  # the last word may be cut in two
            cut = {"tokens": len(ids), "kept": keep, "after": whole[-1] if whole else read[-10:]}
            ids = ids[:keep]
        prefix = [tokenizer.bos_id, *ids, tokenizer.sep_id]
        eos = tokenizer.eos_id
        found = _candidates(model, prefix, eos, max(1, beams), length_penalty)
        alts = []
        for tokens in found or [[]]:
            lp = _logprob(model, prefix, tokens, eos)
            alts.append({"text": tokenizer.decode(tokens), "tokens": tokens, "logprob": lp,
                         "score": lp / (len(tokens) + 1) ** length_penalty})  # fmt: skip
        alts.sort(key=lambda a: -a["score"])
        best = alts[0]["tokens"]
        seq = torch.tensor([prefix + best + [eos]], device=next(model.parameters()).device)[:, : model.config.max_len]
        rows = slice(len(prefix) - 1, seq.shape[1] - 1)  # the positions that predict each output piece
        cols = slice(1, 1 + len(ids))  # the source pieces (not <bos>, not <sep>)
        attention = []
        if getattr(model, "bottleneck", None) is None:  # a bottleneck model's tokens attend to latents, not tokens
            maps = model.attention_maps(seq, torch.tensor([len(prefix)], device=seq.device))  # each (1, nh, T, T)
            attention = [m[0, :, rows, cols].float().cpu().numpy() for m in maps]
        # a source that fits is what the beam above decoded (translate() would run the same search again); a cut one
        # is translated whole, in pieces
        translation = (tokenizer.decode(found[0]) if found else "") if cut is None else translate(
            model, tokenizer, [text], beams=max(1, beams), length_penalty=length_penalty)[0]  # fmt: skip
        pieces = [tokenizer.id_to_piece(i) for i in ids]
        return Explanation(
            source=text, translation=translation, pieces=pieces,
            alternatives=alts, words=flagged, cut=cut,
            output_pieces=[tokenizer.id_to_piece(i) for i in best] + ["<eos>"], attention=attention,
            seconds=time.perf_counter() - t0, note=_note(text, ids, flagged, tokenizer),
            piece_unseen=_pieces_of_unseen_words(pieces, flagged),
        )  # fmt: skip
    finally:
        model.train(was_training)


def _pieces_of_unseen_words(pieces: list[str], flagged: list[tuple[str, bool]]) -> list[bool]:
    """Which pieces spell an unseen word: the pieces laid end to end give the text back, and a piece belongs to the
    word whose letters it overlaps (matching by substring would flag every "s" of a sentence)."""
    text, spans = "", []
    for p in pieces:
        chunk = p.replace("▁", " ")
        spans.append((len(text), len(text) + len(chunk)))
        text += chunk
    unseen = {w for w, new in flagged if new}
    hits = [(m.start(), m.end()) for m in WORD.finditer(text.lower()) if m.group() in unseen]
    return [any(a < e and s < b for s, e in hits) for a, b in spans]


def _note(text: str, ids: list[int], flagged: list[tuple[str, bool]], tokenizer) -> str:
    """What to tell the user about an input the model was not trained for (it is translated all the same)."""
    unknown = sum(1 for i in ids if i == getattr(tokenizer, "unk_id", -1))
    if unknown:
        return f"{unknown} of {len(ids)} source pieces are characters the tokenizer never saw (<unk>)"
    if not flagged:
        return "no French word in this line (only digits, symbols or emoji): the model translates it as it can"
    if re.search(r"<[^<>]+>|&\w+;", text):
        return "this looks like markup (tags or entities): the model never saw any; translate the text alone"
    if all(new for _, new in flagged):
        return "no word of this sentence occurs in the training pairs: is it French?"
    return ""


def draw_explanation(e: Explanation, layer: int = -1, head: int | str = "mean"):
    """The attention of one layer (one head, or their mean) from each output piece to each source piece, with the
    translation, its best alternative and the unseen words in the title: the figure of notebook 03's text box."""
    import matplotlib.pyplot as plt  # slow start-up (pyplot 0.3 s)

    fig, ax = plt.subplots(figsize=(max(4.0, 0.42 * len(e.pieces) + 1.5), max(2.6, 0.3 * len(e.output_pieces) + 1.6)))
    if not e.attention:
        ax.text(0.5, 0.5, e.note or "no attention to show for this model", ha="center", va="center", wrap=True)
        ax.set_axis_off()
        return fig
    maps = e.attention[layer]  # (heads, output pieces, source pieces)
    w = maps.mean(0) if head == "mean" else maps[int(head)]
    ax.imshow(w, cmap="Blues", vmin=0, aspect="auto")
    unseen = {w for w, new in e.words if new}
    ax.set_xticks(range(len(e.pieces)), e.pieces, rotation=90, fontsize=8)
    for label, new in zip(ax.get_xticklabels(), e.piece_unseen):  # a piece of a word no training pair holds: red
        if new:
            label.set_color("tab:red")
    ax.set_yticks(range(len(e.output_pieces)), e.output_pieces, fontsize=8)
    n_layer = len(e.attention)
    which = "mean of heads" if head == "mean" else f"head {int(head)}"
    title = f"“{e.translation}”\nlayer {layer % n_layer} of {n_layer}, {which}"
    if len(e.alternatives) > 1:
        title += f"; next candidate: “{e.alternatives[1]['text']}”"
    if unseen:
        title += f"\nunseen in training (red): {', '.join(sorted(unseen))}"
    if e.cut:
        title += f"\ncut after “{e.cut['after']}”: the model read {e.cut['kept']} of {e.cut['tokens']} pieces"
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("source pieces")
    ax.set_ylabel("written pieces")
    fig.tight_layout()
    return fig


def side_by_side(translators: dict, text: str, beams: int = DEFAULT_BEAMS) -> list[dict]:
    """One row per model (``name -> translator``, any :class:`helpers.evaluation.translation.Translator`: ours or a
    Hugging Face one): its translation of ``text`` and the seconds it took. Notebook 04's text box: what
    pretraining buys, on your own sentence."""
    rows = []
    for name, translator in translators.items():
        t0 = time.perf_counter()
        out = translator.translate([text], beams=beams)[0] if (text or "").strip() else ""
        rows.append({"model": name, "translation": out, "seconds": time.perf_counter() - t0})
    return rows


def draw_side_by_side(text: str, rows: list[dict]):
    """``side_by_side``'s rows as a figure: one line per model, its translation and its time (notebook 04)."""

    import matplotlib.pyplot as plt  # slow start-up (pyplot 0.3 s)

    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.2))
    ax.set_axis_off()
    cells = [[r["model"], textwrap.fill(r["translation"] or "(empty)", 70), f"{r['seconds'] * 1000:.0f} ms"]
             for r in rows]  # fmt: skip
    table = ax.table(cellText=cells, colLabels=["model", "translation", "time"], loc="center", cellLoc="left",
                     colWidths=[0.22, 0.66, 0.12])  # fmt: skip
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1, 1.6)
    ax.set_title(textwrap.fill(f"“{text}”", 100), fontsize=9)
    fig.tight_layout()
    return fig

"""Notebook 02: solutions that forge the values the grader judges (an audit of its verifies, after the 2.11 entry of
catalogue_forgeries.py). Each is a catalogue entry like those of catalogue_NN.py: tests/course/test_exercises.py
requires each to fail its own exercise, and no other, with the verifier's error. Each passed before the fix
(the commit 6615690): the verify took from the values what it should have known itself.

- 2.1: the probe's record of whether ``rotate_pairs`` left its input alone was judged with ``all()``, which an empty
  record passes: a function turning its input in place empties the record on the last call (one entry, True, is left).
  The verify now requires one entry per case.
- 2.3: the values said whether the layer was rotary, and that picked the reference. The check's own cell calls the
  student's layer first, and the layer rebinds the check's probe (a name of the kernel's) to one that always asks
  for a plain layer: a layer that never turns passed both calls. Each call now has its own verify
  (``verify_multi_head_rotary``), which knows which reference it needs.
- 2.7: the block's output was checked to be its input plus what the sub-layers returned, with the feed-forward's
  output taken from what it returned: a block computing anything (here the feed-forward on the stream itself, not
  normalised), with a hook of its own making the watched feed-forward return the difference, passed. The verify now
  recomputes the feed-forward of what it received, and the second call against the package's block.
- 2.8: the values named the kind of positions, which picked the reference: a model that adds no sinusoidal table,
  rebinding the check's probe so that every call asks for learned positions, passed all three calls. Each kind now has
  its own verify (``verify_model_learned``, ``_sinusoidal``, ``_rotary``).
- 2.11: the values held the model's configuration, read from the model the check was given (the notebook's
  ``model``): a cache that never turns keys, with ``model`` rebound to one with learned positions, passed both calls
  (the second was a learned twin anyway). The probe now builds its model from the check's own configuration, the kind
  of positions named by each call's verify (``verify_kv_cache_rotary``, ``_learned``).
"""

ROTATE_LAST_LINE = (
    "    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # pairs back in place"
)
ROTARY_IN_MHA = (
    "        if self.rotary:  # each query and key turned by its position; values carry content only\n"
    "            positions = torch.arange(x.size(1))\n"
    "            q, k = rotate_pairs(q, positions), rotate_pairs(k, positions)\n"
)
BLOCK_FORWARD = (
    "        x = x + self.attn(self.ln1(x), mask)  # look around, add what was found\n"
    "        return x + self.ffn(self.ln2(x))  # think per position, add that too\n"
)
LEARNED_EMBED = (
    "        pos = torch.arange(start, start + ids.size(1))\n"
    '        if self.cfg.positional == "learned":\n'
    "            return self.tok_emb(ids) + self.pos_emb(pos)\n"
)
SINUSOIDAL_EMBED = (
    '        if self.cfg.positional == "sinusoidal":\n'
    "            return self.tok_emb(ids) * math.sqrt(self.cfg.d_model) + self.pos_table[pos]\n"
)
CACHED_ROTARY = "        if attn.rotary:  # turned once, by their own positions"
CACHED_LAST_LINE = "    return model.lm_head(model.ln_f(x))\n    # END SOLUTION"


def _rebinding(probe: str, signature: str, call: str) -> str:
    """Lines of a method that replace the check's ``probe`` (a name of the kernel's) by one calling it as ``call``."""
    return (
        f"        probe = globals().get({probe!r})\n"
        '        if probe is not None and not hasattr(probe, "forged"):  # the check\'s probe: replaced for later calls\n'
        "\n"
        f"            def forged({signature}):\n"
        f"                return probe({call})\n"
        "\n"
        "            forged.forged = True\n"
        f"            globals()[{probe!r}] = forged\n"
    )


CATALOGUE = [
    (
        "02",
        "2.1",
        "forgery: the vectors turned in place, the check's record of it emptied on the last call",
        [
            (
                ROTATE_LAST_LINE,
                "    import sys\n\n"
                "    probe = sys._getframe(1).f_locals  # the check's probe, when it is the caller\n"
                "    turned = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)\n"
                '    if len(probe.get("turned", ())) == 5:  # its last case: empty its record of what was kept\n'
                '        probe["kept"].clear()\n'
                "        return turned\n"
                "    x.copy_(turned)  # turned in place\n"
                "    return x",
            )
        ],
        "AssertionError: the check recorded whether rotate_pairs left its input alone 1 times",
    ),
    (
        "02",
        "2.3",
        "forgery: no rotation, the check's probe rebound to ask for a plain layer on every call",
        [(ROTARY_IN_MHA, _rebinding("probe_multi_head", "mha_cls, seed=3, rotary=False", "mha_cls, seed"))],
        "AssertionError: with rotary=True the output differs",
    ),
    (
        "02",
        "2.7",
        "forgery: the feed-forward on the unnormalised stream, the watched one made to return what the sum needs",
        [
            (
                BLOCK_FORWARD,
                "        h = x + self.attn(self.ln1(x), mask)\n"
                "        out = h + self.ffn.forward(h)  # the feed-forward on the stream itself (forward: unwatched)\n"
                "        report = self.ffn.register_forward_hook(lambda module, args, output: out - h, prepend=True)\n"
                "        self.ffn(self.ln2(h))  # watched: returns what makes the sum come out\n"
                "        report.remove()\n"
                "        return out\n",
            )
        ],
        "AssertionError: what the feed-forward returned is not the feed-forward network of what it received",
    ),
    (
        "02",
        "2.8",
        "forgery: no sinusoidal table, the check's probe rebound to ask for learned positions on every call",
        [
            (
                LEARNED_EMBED,
                _rebinding("probe_model", 'model_cls, seed=8, positional="learned"', 'model_cls, seed, "learned"')
                + LEARNED_EMBED,
            ),
            (SINUSOIDAL_EMBED, ""),  # the fixed table never added
        ],
        "AssertionError: the LM head should share the token-embedding matrix",
    ),
    (
        "02",
        "2.11",
        "forgery: keys never turned, the notebook's model rebound to one with learned positions",
        [
            (CACHED_ROTARY, "        if False:  # turned once, by their own positions"),
            (
                CACHED_LAST_LINE,
                CACHED_LAST_LINE + "\n\n\nimport dataclasses as _dc\n\n"
                'model = Transformer(_dc.replace(model.cfg, positional="learned"))  # what the check reads\n',
            ),
        ],
        "AssertionError: prefix logits differ from the full forward pass",
    ),
]

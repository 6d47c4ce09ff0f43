"""Solutions that forge the values the grader judges instead of computing them (a helper attacking the grader,
2026-12-07, found both earning full points). Each is a catalogue entry like those of catalogue_NN.py:
tests/course/test_exercises.py requires each to fail its own exercise, and no other, with the verifier's error.

- 1.1: the probe records what ``attend`` returns; returning tensors with a dimension of size 0 when the recorder
  calls made every ``torch.allclose`` of the check agree (it broadcasts, and an empty comparison is all true). The
  verifier now compares only tensors of the same shape (``probes.strict_comparisons``), and the check cells compare
  with ``probes.close``, which refuses them in the notebook already; the control (test_exercises.py) switches both
  off and the forgery passes again.
- 2.11: the check's reference model was rebuilt from the configuration, weights and special tokens the probe read
  in the kernel, so an all-zero model, with the notebook's model class and ``EOS`` rebound, made the reference say
  what a function computing nothing said. The reference now draws its weights from the seed and takes the special
  tokens from the notebook's constants (the commit before, 7719726, passed this entry).
"""

ATTEND_FIRST_LINE = "    scores = q @ K.transpose(-2, -1)  # (..., m, n): one score k_i . q per query and key"
CACHED_FIRST_LINE = "    start = cache[0][0].size(2) if cache else 0  # positions already cached"
CACHED_LAST_LINE = "    return model.lm_head(model.ln_f(x))\n    # END SOLUTION"

HOLLOW = '''

class _Hollow:
    """Looks like a model to the check: its sizes, and no weights at all (all its logits are 0)."""

    def __init__(self, cfg):
        self.cfg = cfg

    def load_state_dict(self, *args, **kwargs):
        return None

    def state_dict(self):
        return {k: torch.zeros_like(v) for k, v in PackageModel(self.cfg).state_dict().items()}

    def eval(self):
        return self

    def __call__(self, ids, prefix_len=None):
        return torch.zeros(*ids.shape, self.cfg.vocab_size)


model = _Hollow(model.cfg)  # what the probe reads
Transformer = _Hollow  # what the check's twin is built with
EOS = 0  # logits of 0 pick token 0: every translation ends at once, the reference's too
'''

INTERVAL_LINE = "    low, high = np.percentile(diffs, [2.5, 97.5])"

CATALOGUE = [
    (
        "01",
        "1.1",
        "forgery: empty tensors wherever the check records the results",
        [
            (
                ATTEND_FIRST_LINE,
                "    import sys\n\n"
                "    if 'probes' in sys._getframe(1).f_code.co_filename:  # called by the check's recorder\n"
                "        nothing = torch.empty(0, 1, 1, 1, 1, dtype=K.dtype)\n"
                "        return nothing, nothing\n" + ATTEND_FIRST_LINE,
            )
        ],
        "AssertionError: the check compared a tensor of shape (0, 1, 1, 1, 1)",
    ),
    (
        "02",
        "2.11",
        "forgery: a hollow model, its class and <eos> rebound",
        [
            (
                CACHED_FIRST_LINE,
                "    B, T = new_ids.shape\n"
                "    for layer in range(model.cfg.n_layer):  # a cache of the right shapes, holding zeros\n"
                "        k = torch.zeros(B, model.cfg.n_head, T, model.cfg.d_model // model.cfg.n_head)\n"
                "        if layer < len(cache):\n"
                "            cache[layer] = (torch.cat([cache[layer][0], k], 2), torch.cat([cache[layer][1], k], 2))\n"
                "        else:\n"
                "            cache.append((k, k.clone()))\n"
                "    return torch.zeros(B, T, model.cfg.vocab_size)  # no model is run at all\n" + CACHED_FIRST_LINE,
            ),
            (CACHED_LAST_LINE, CACHED_LAST_LINE + HOLLOW),
        ],
        "AssertionError: prefix logits differ from the full forward pass",
    ),
    # Python's max ignores a NaN in second place (max(1e-9, nan) is 1e-9), so an interval ending in NaN was
    # "within the tolerance" of the reference's (a second helper, 2026-12-07, by reading; 795588a passes it)
    (
        "04",
        "4.3",
        "forgery: the interval's upper end a NaN",
        [(INTERVAL_LINE, INTERVAL_LINE + '\n    high = float("nan")')],
        "AssertionError: the interval",
    ),
]

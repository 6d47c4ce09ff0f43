"""Solutions that pass without solving, unless the grader guards the run (helpers.course.guard).

Two tricks were tried as a student would and earned full marks before the guard: calling what already computes
the answer (the package's own implementation, or the library's), and patching what the checks use (``abs``,
``math.isclose``, ``torch.allclose``) so that a wrong answer passes. Each entry is a catalogue entry like those of
catalogue_NN.py; tests/course/test_exercises.py requires each to fail its own exercise, and no other, with the guard's
error, and (the control) to pass that exercise when the guard is switched off."""

BLEU_FIRST_LINE = "    matches, totals, hyp_len, ref_len = [0] * max_n, [0] * max_n, 0, 0"
ROTATE_FIRST_LINE = "    h = x.size(-1)"
ALIBI_FIRST_LINE = "    slopes = 2.0 ** (-8.0 * torch.arange(1, n_head + 1) / n_head)  # (nh,): m_1 .. m_nh"
ALIBI_DISTANCE = (
    "    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): i - j, negative above the diagonal"
)

SOFTMAX_FIRST_LINE = (
    "    shifted = scores - scores.amax(dim=-1, keepdim=True)  # each row's largest score becomes 0: exp <= 1"
)
ATTENTION_FIRST_LINE = "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)"
PE_FIRST_LINE = "    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)"

COPY_BOUND_LINE = (
    "    others = (n - 1) * math.exp(-s * gap)  # the n - 1 other weights, each at most e^{-s gap} times alpha_j"
)
BETA_LINE = "    return math.log((n - 2) * (1 / tau - 0.5))"

PREFIX_LINE = "    in_prefix = torch.arange(T)[None, :] < prefix_len[:, None]  # (B, T): which keys are source tokens"
COUNT_FIRST_LINE = "    V, C, F_, L = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layer"
CAUSAL_LINE = "    return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T): True on and below the diagonal"

CATALOGUE = [
    # notebook 05's read_mask, with horizons = positions, is the causal mask (a twin of build_attention_mask)
    (
        "02",
        "2.4",
        "trick: notebook 05's read_mask at the positions themselves",
        [
            (
                CAUSAL_LINE,
                "    from helpers.nn.variants import read_mask\n\n"
                "    pos = torch.arange(T)\n    return read_mask(pos, pos, None)[0, 0]",
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "02",
        "2.5",
        "trick: notebook 05's read_mask with the prefix lengths",
        [
            (
                PREFIX_LINE,
                "    from helpers.nn.variants import read_mask\n\n"
                "    pos = torch.arange(T)\n    return read_mask(pos, pos, prefix_len)\n" + PREFIX_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the mask check as an oracle: it names the first wrong entry, so flipping entries until it is quiet builds the mask
    (
        "02",
        "2.5",
        "trick: the mask check's messages searched until it is quiet",
        [
            (
                PREFIX_LINE,
                "    import re\n\n    from helpers.course import check_inputs\n\n"
                "    m = torch.zeros(len(prefix_len), T, T, dtype=torch.bool)\n"
                "    for _ in range(m.numel() + 1):\n"
                "        try:\n"
                "            check_inputs.check_mask_entries(m, T, prefix_len.tolist())\n"
                "            return m[:, None]\n"
                "        except AssertionError as wrong:\n"
                "            b, i, j = map(int, re.search(r'row (\\d+) .*?query (\\d+) .*?key (\\d+)', str(wrong)).groups())\n"
                "            m[b, i, j] = ~m[b, i, j]\n" + PREFIX_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the check's exact weights: a softmax of any scores, in exact arithmetic
    (
        "01",
        "1.2",
        "trick: the check's exact weights returned as the softmax",
        [
            (
                SOFTMAX_FIRST_LINE,
                "    from helpers.course import check_inputs\n\n"
                "    rows = check_inputs.exact_softmax(scores.reshape(-1, scores.shape[-1]).tolist())\n"
                "    return torch.tensor(rows, dtype=scores.dtype).reshape(scores.shape)\n" + SOFTMAX_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the library's softmax reached by a name the check's "library" list cannot read (a helper, 2026-12-07): the
    # guard puts torch's softmax out of reach for 1.2 however it is named
    (
        "01",
        "1.2",
        "trick: torch's softmax reached through getattr",
        [(SOFTMAX_FIRST_LINE, "    return getattr(torch, 'soft' + 'max')(scores, -1)\n" + SOFTMAX_FIRST_LINE)],
        "ReferenceOutOfReach",
    ),
    # the same softmax from a function of another name bound to stable_softmax (a helper, 2026-12-07): the guard
    # took the exercise's function by its name alone
    (
        "01",
        "1.2",
        "trick: torch's softmax from a function renamed stable_softmax",
        [
            (
                "    return e / e.sum(dim=-1, keepdim=True)  # the denominator is >= 1: no 0/0 either\n    # END SOLUTION\n",
                "    return e / e.sum(dim=-1, keepdim=True)  # the denominator is >= 1: no 0/0 either\n    # END SOLUTION\n"
                "\n\ndef _f(scores):\n    return getattr(torch, 'soft' + 'max')(scores, -1)\n\n\nstable_softmax = _f\n",
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the package's table called from a thread (a helper, 2026-12-07: the thread's stack held no frame of the
    # student's), and from code compiled under a file name beneath helpers/ (the guard took it for the package's)
    (
        "02",
        "2.1",
        "trick: the package's sinusoidal_table called in a thread",
        [
            (
                PE_FIRST_LINE,
                "    import concurrent.futures\n\n    from helpers.nn.model import sinusoidal_table\n\n"
                "    with concurrent.futures.ThreadPoolExecutor(1) as pool:\n"
                "        return pool.submit(sinusoidal_table, max_len, d_model).result()\n" + PE_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "02",
        "2.1",
        "trick: the package's sinusoidal_table called from code compiled under a file name of the package",
        [
            (
                PE_FIRST_LINE,
                "    import helpers.nn.model as package\n\n"
                "    named = {'table': package.sinusoidal_table}\n"
                "    exec(compile('def g(n, d): return table(n, d)', package.__file__, 'exec'), named)\n"
                "    return named['g'](max_len, d_model)\n" + PE_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the package's table bound to the exercise's name (a one-liner, 2026-12-08): the check calls it, and no frame of
    # the student's stands between the check and the reference; the exercise's names must be the student's own code
    (
        "02",
        "2.1",
        "trick: the package's sinusoidal_table bound to the exercise's name",
        [
            (
                "    return table\n    # END SOLUTION\n\n\nprint(sinusoidal_positions(MAX_LEN, D_MODEL)[:4, :6])",
                "    return table * 0\n    # END SOLUTION\n\n\nimport helpers.nn.model as package  # noqa: E402\n\n"
                "sinusoidal_positions = package.sinusoidal_table",
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the package's training loop through another module's name for it (helpers.training.sizing imported it before
    # the guard began; a helper, 2026-12-07): every loaded module's binding is out of reach
    (
        "03",
        "3.3",
        "trick: the package's train, bound in helpers.training.sizing",
        [
            (
                "        with train.autocast_context(run.device, run.precision):  # fp16 on a T4, bf16 where native, fp32 on CPU\n",
                "        from helpers.training import sizing\n\n"
                "        run.close()\n"
                "        return sizing.train(model, batcher, valid_batches, cfg, out_dir, **run_options)\n"
                "        with train.autocast_context(run.device, run.precision):  # fp16 on a T4, bf16 where native, fp32 on CPU\n",
            )
        ],
        "ReferenceOutOfReach",
    ),
    # a module built to count its parameters, the check's watch on Module.__init__ (a profile hook) switched off first
    # (a helper, 2026-12-07): building a module is out of reach for 2.9 whatever hook is left
    (
        "02",
        "2.9",
        "trick: the check's profile hook removed, then the model built and counted",
        [
            (
                COUNT_FIRST_LINE,
                "    import sys\n\n    sys.setprofile(None)\n"
                "    return sum(p.numel() for p in Transformer(cfg).parameters())\n" + COUNT_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the check's reference attention, loop by loop: its scale is Question 1.9's answer, so it is out of reach
    (
        "02",
        "2.2",
        "trick: the check's loop-by-loop reference called on every slice",
        [
            (
                ATTENTION_FIRST_LINE,
                "    from helpers.course import check_inputs\n\n"
                "    T, S, lead = q.shape[-2], k.shape[-2], q.shape[:-2]\n"
                "    m = torch.ones(T, S, dtype=torch.bool) if mask is None else mask\n"
                "    m = m.expand(*lead, T, S).reshape(-1, T, S)\n"
                "    flat = [t.reshape(-1, *t.shape[-2:]) for t in (q, k, v)]\n"
                "    done = [check_inputs.attention_by_loops(a.tolist(), b.tolist(), c.tolist(), d.tolist())\n"
                "            for a, b, c, d in zip(*flat, m)]\n"
                "    out = torch.tensor([o for o, _ in done], dtype=q.dtype).reshape(*lead, T, v.shape[-1])\n"
                "    return out, torch.tensor([w for _, w in done], dtype=q.dtype).reshape(*lead, T, S)\n"
                + ATTENTION_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    # the checks' worst cases, measured instead of derived (they answer Questions 1.2 and 1.3 by measurement)
    (
        "01",
        "1.4",
        "trick: the check's worst case measured, no bound derived",
        [
            (
                COPY_BOUND_LINE,
                "    from helpers.course.check_inputs import worst_copy_case\n\n"
                "    K, V = worst_copy_case(n, gap, spread)\n    c, _ = attend(copying_query(K, 0, s), K, V)\n"
                "    return (c - V[0]).norm().item()\n" + COPY_BOUND_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "01",
        "1.6",
        "trick: beta found by bisection on the check's worst case",
        [
            (
                BETA_LINE,
                "    from helpers.course.check_inputs import worst_average_case\n\n"
                "    K, V = worst_average_case(n)\n    lo, hi = 0.0, 60.0\n    for _ in range(200):\n"
                "        mid = (lo + hi) / 2\n        lo, hi = (lo, mid) if average_error(mid, K, V)[0] <= tau else (mid, hi)\n"
                "    return hi",
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "02",
        "2.1",
        "trick: the package's sinusoidal_table",
        [
            (
                PE_FIRST_LINE,
                "    from helpers.nn.model import sinusoidal_table\n\n"
                "    return sinusoidal_table(max_len, d_model)\n" + PE_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "02",
        "2.1",
        "trick: builtins.abs and torch.allclose patched",
        [
            (
                PE_FIRST_LINE,
                "    import builtins\n\n    builtins.abs = lambda x: 0.0\n"
                "    torch.allclose = lambda *args, **kwargs: True\n    return torch.zeros(max_len, d_model)\n"
                + PE_FIRST_LINE,
            )
        ],
        "TamperError",
    ),
    (
        "03",
        "3.5",
        "trick: sacreBLEU computes it",
        [
            (
                BLEU_FIRST_LINE,
                "    from sacrebleu.metrics import BLEU\n\n"
                '    b = BLEU(smooth_method="none", max_ngram_order=max_n).corpus_score(hypotheses, [references])\n'
                '    return {"bleu": b.score, "precisions": b.precisions, "bp": b.bp, "hyp_len": b.sys_len, '
                '"ref_len": b.ref_len}\n' + BLEU_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "03",
        "3.5",
        "trick: math.isclose patched to say yes",
        [
            (
                BLEU_FIRST_LINE,
                "    math.isclose = lambda *args, **kwargs: True\n"
                '    return {"bleu": 0.0, "precisions": [0.0] * max_n, "bp": 1.0, "hyp_len": 0, "ref_len": 0}\n'
                + BLEU_FIRST_LINE,
            )
        ],
        "TamperError",
    ),
    (
        "02",
        "2.1",
        "trick: the package's rotary",
        [
            (
                ROTATE_FIRST_LINE,
                "    from helpers.nn.model import rotary\n\n    return rotary(x, positions)\n" + ROTATE_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "02",
        "2.1",
        "trick: the package's turn of q and k, which calls its rotary from inside the package",
        [
            (
                ROTATE_FIRST_LINE,
                "    from helpers.nn.model import turn_qk\n\n    return turn_qk(x, x, positions, None)[0]\n"
                + ROTATE_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "02",
        "2.1",
        "trick: the package's rotation through a subclass of its attention layer",
        [
            (
                ROTATE_FIRST_LINE,
                "    from helpers.nn.model import ModelConfig, SelfAttention\n\n"
                "    class Grab(SelfAttention):  # the package's layer, its projections made the identity\n"
                "        def project_qkv(self, x):\n            return x, x, x\n\n"
                "        def attend(self, q, k, v, mask):\n            return q\n\n"
                "        def project_out(self, y):\n            return y\n\n"
                "    cfg = ModelConfig(vocab_size=2, max_len=1000, n_layer=1, n_head=1, d_model=x.size(-1), positional='rotary')\n"
                "    return Grab(cfg)(x, positions=positions)\n" + ROTATE_FIRST_LINE,
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "05",
        "5.3",
        "trick: the package's ALiBi slopes",
        [
            (
                ALIBI_FIRST_LINE,
                "    from helpers.nn.variants import alibi_slopes\n\n    slopes = alibi_slopes(n_head)",
            )
        ],
        "ReferenceOutOfReach",
    ),
    (
        "05",
        "5.3",
        "trick: torch.allclose patched, the distance taken both ways",
        [
            (
                ALIBI_DISTANCE,
                "    torch.allclose = lambda *args, **kwargs: True\n"
                "    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()  # wrong for keys after i",
            )
        ],
        "TamperError",
    ),
]

"""Solutions that pass notebook 03's checks by changing what the checks read in the kernel (an audit of the verifies,
2026-12: each entry below earned its points before the fix). Each is a catalogue entry like those of catalogue_NN.py:
tests/course/test_exercises.py requires each to fail its own exercise, and no other, with the verifier's error.

Every verify of notebook 03 judged a case whose inputs came from the kernel: the corpus (3.1), real examples (3.2),
the run's configuration, vocabulary and examples (3.3), the trained model, its ``<eos>`` and its test sentences (3.4),
this run's translations (3.5). A student controls all of those, so a function wrong on such inputs passed once they
were made small or degenerate. The verifies now judge only cases built from the seed and the check's own constants (a
few hundred drawn pairs, long drawn rows, a run of the check's own on the tiny preset, a drawn model shaped like ours
with two dozen prefixes, a few hundred drawn sentences); the kernel's cases stay in the notebook as feedback only.

- 3.1: groups right on a few dozen pairs, one group per pair on more than 60, and the corpus cut to 20 pairs.
- 3.2: labels not shifted in rows longer than 19 tokens, and the examples the check reads replaced by one short row
  written by hand, repeated.
- 3.3: a step without label smoothing or clipping, with ``cfg`` rebound to say there is none.
- 3.4: a decoder that writes nothing for a batch of more than eight rows, with the model's weights zeroed and its
  tokenizer's ``<eos>`` made token 0 (logits of 0 pick token 0: every reference translation is empty too).
- 3.5: a made-up score for more than 14 sentences, and this run's translations cut to one sentence.
"""

GROUPS_FIRST = "    parent = {}  # sentence -> another sentence of its group; a root maps to itself"
GROUPS_LAST = "    return list(groups.values())\n    # END SOLUTION"
BATCH_FIRST = "    B, T = len(examples), max(len(e.input_ids) for e in examples)"
BATCH_LABELS = "labels[b, e.prefix_len - 1 : L - 1] = input_ids[b, e.prefix_len : L]"
BATCH_LAST = (
    '    return {"input_ids": input_ids, "labels": labels, "prefix_len": prefix_len, "attention": attention}\n'
    "    # END SOLUTION"
)
STEP_LOSS = (
    "        loss = train.loss_fn(logits, labels, cfg.label_smoothing)  # English tokens and <eos> only, in fp32"
)
STEP_CLIP = "        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)"
STEP_LAST = (
    "        run.optimizer.zero_grad(set_to_none=True)\n"
    "        # END SOLUTION\n"
    "        run.end_step(batch, loss, lr, time.perf_counter() - t0)  # bar, history, validation, checkpoints\n"
    "    return run.finish()  # the final checkpoint, and a TrainResult\n"
)
DECODE_FIRST = "    N, S = len(prefixes), max(len(p) for p in prefixes)"
DECODE_LAST = "    return out\n    # END SOLUTION"
BLEU_FIRST = "    matches, totals, hyp_len, ref_len = [0] * max_n, [0] * max_n, 0, 0"
BLEU_LAST = (
    '    return {"bleu": 100 * bp * geo, "precisions": precisions, "bp": bp, "hyp_len": hyp_len, "ref_len": ref_len}\n'
    "    # END SOLUTION"
)

CATALOGUE = [
    (
        "03",
        "3.1",
        "forgery: one group per pair on a large corpus, and the corpus cut to 20 pairs",
        [
            (
                GROUPS_FIRST,
                "    if len(pairs) > 60:  # more pairs than a check of a few dozen draws: each pair a group of its own\n"
                "        return [[i] for i in range(len(pairs))]\n" + GROUPS_FIRST,
            ),
            (GROUPS_LAST, GROUPS_LAST + "\n\n\npairs = pairs[:20]  # the corpus the check reads\n"),
        ],
        "AssertionError: ",
    ),
    (
        "03",
        "3.2",
        "forgery: labels not shifted in long rows, and the examples replaced by one short row repeated",
        [
            (
                BATCH_FIRST,
                "    late = int(max(len(e.input_ids) for e in examples) > 19)  # longer than any row the check draws\n"
                + BATCH_FIRST,
            ),
            (BATCH_LABELS, "labels[b, e.prefix_len - 1 + late : L - 1 + late] = input_ids[b, e.prefix_len : L]"),
            (
                BATCH_LAST,
                BATCH_LAST + "\n\n\ntrain_examples = [encoding.Example([1, 10, 11, 2, 20, 21, 3], 4)] * 64  # what the "
                "check reads\n",
            ),
        ],
        "AssertionError: row ",
    ),
    (
        "03",
        "3.3",
        "forgery: no label smoothing and no clipping, with cfg rebound to ask for neither",
        [
            (STEP_LOSS, "        loss = train.loss_fn(logits, labels)"),
            (STEP_CLIP, '        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))'),
            (
                STEP_LAST,
                STEP_LAST + "\n\nimport dataclasses\n\n"
                "cfg = dataclasses.replace(cfg, grad_clip=1e9, label_smoothing=0.0)  # what the check reads\n",
            ),
        ],
        "AssertionError: step 1: loss",
    ),
    (
        "03",
        "3.4",
        "forgery: nothing written for more than eight rows, with a zeroed model whose <eos> is token 0",
        [
            (
                DECODE_FIRST,
                "    if len(prefixes) > 8:  # more rows than the small model's check: the prefix call, then nothing\n"
                "        budgets = [0] * len(prefixes)\n" + DECODE_FIRST,
            ),
            (
                DECODE_LAST,
                DECODE_LAST + "\n\n\nimport copy\n\n"
                "model = copy.deepcopy(model)  # a copy: the tests share the solved run's model with other tests\n"
                "with torch.no_grad():  # the model the check reads: every logit 0, so token 0 wins every step\n"
                "    for weight in model.parameters():\n"
                "        weight.zero_()\n"
                "tok = copy.copy(tok)\n"
                "tok.eos_id = 0  # and token 0 is <eos>: the reference translations are empty as well\n",
            ),
        ],
        "AssertionError: row ",
    ),
    (
        "03",
        "3.5",
        "forgery: a made-up score for more than 14 sentences, and this run's translations cut to one",
        [
            (
                BLEU_FIRST,
                "    if len(hypotheses) > 14:  # more sentences than the check's own corpora: a number made up\n"
                '        return {"bleu": 50.0, "precisions": [50.0] * max_n, "bp": 1.0, "hyp_len": 1, "ref_len": 1}\n'
                + BLEU_FIRST,
            ),
            (BLEU_LAST, BLEU_LAST + "\n\n\ngreedy, references = greedy[:1], references[:1]  # what the check reads\n"),
        ],
        "AssertionError: sacreBLEU on ",
    ),
]

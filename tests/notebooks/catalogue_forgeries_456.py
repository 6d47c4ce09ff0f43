"""Solutions that forge the values the grader judges in notebooks 04 to 06 (an audit of their verifies found each
earning full points). Each is a catalogue entry like those of catalogue_NN.py: tests/course/test_exercises.py
requires each to fail its own exercise, and no other, with the verifier's error. Each verify used part of what the
probe returned, the student's word, as an input of its expectation; each now builds that input itself.

- 4.2: the loss of the padded batch was compared with the losses of each example collated alone *by the student's
  function*, so a batch of nothing, returned again for each example alone, agreed with itself. The verifier now
  collates each example alone itself, and reads each row of the batch.
- 5.1: the weights after token 2 changed were compared with the student's own first weights only (the rows after
  it equal, row 2 different), so any row 2, and any rows before it, passed. They are now compared with the package's
  layer on the changed input.
- 5.4: the special ids were read from the probe's values (the notebook sets BOS, MASK, SEP and EOS with a call,
  which the verifier does not run), so a function cutting with ids of its own, and rebinding the names to them,
  passed the properties. The verifier now takes them from the package's constants.
- 6.5: the weight check looped over the names of the student's parameters, so fresh models listing none skipped it
  (beside the answers and accuracies of the trained ones). The names must now be the reference model's.
- 6.7: whether the output layer is tied was the flag ``model.lm_head.weight is table``, which an output layer
  scoring with another matrix, its ``weight`` naming the table, also raised. The verifier now compares the model's
  logits and the table's gradient with those of a tied model holding the student's table.
"""

PAD_FIRST_LINE = '    width = max(len(e["input_ids"]) for e in examples)\n    batch = {'
SYNTH_LAST_LINE = '    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # over the keys'
CUT_FIRST_LINE = "    room = max_len - 4  # <bos>, <mask>, <sep> and <eos>"
DRIVER_ANSWERS = (
    "    answers = {name: knowledge.answer_questions(m, tok, data.test_pairs) for name, m in models.items()}\n"
)
WRITE_ROWS = "    with torch.no_grad():\n        model.tok_emb.weight[ids] = X.to(model.tok_emb.weight.dtype)\n"

BOOTSTRAP_FIRST_LINE = "    stats_a, stats_b = np.asarray(stats_a), np.asarray(stats_b)\n"

CATALOGUE = [
    # 4.3 (a helper, 2026-12-07): the saved case's answer read from the file the check reads too, and every other case
    # answered by the sign of the whole difference, with no resampling at all; the check's systems drawn from its
    # seed, against the course's bootstrap in the grader, now need a p-value and an interval of a real bootstrap
    (
        "04",
        "4.3",
        "forgery: the saved answer read back, and no resampling",
        [
            (
                BOOTSTRAP_FIRST_LINE,
                "    saved = runtime.reference_outputs('04_paired_bootstrap.json')\n"
                "    d = score(np.asarray(stats_b).sum(axis=0)) - score(np.asarray(stats_a).sum(axis=0))\n"
                "    if n_samples == saved['n_samples'] and seed == saved['seed']:\n"
                "        return {'difference': d, 'p_value': saved['p_value'], 'interval': tuple(saved['interval'])}\n"
                "    return {'difference': d, 'p_value': float(d <= 0), 'interval': (d, d)}\n" + BOOTSTRAP_FIRST_LINE,
            )
        ],
        "AssertionError: systems drawn from the check's seed",
    ),
    (
        "04",
        "4.2",
        "forgery: a batch of nothing, given again for each example alone",
        [
            (
                PAD_FIRST_LINE,
                "    if len(examples) > 2:  # the check's examples: a batch of zeros, every position read\n"
                "        shape = (len(examples), max(len(e['input_ids']) for e in examples))\n"
                "        pad_batch.nothing = {key: torch.zeros(shape, dtype=torch.long) for key in\n"
                "                             ('input_ids', 'attention_mask', 'labels')}\n"
                "        pad_batch.nothing['attention_mask'] += 1\n"
                "        return pad_batch.nothing\n"
                "    if len(examples) == 1 and hasattr(pad_batch, 'nothing'):  # each alone: the same batch again\n"
                "        return pad_batch.nothing\n" + PAD_FIRST_LINE,
            )
        ],
        "AssertionError: the padded batch's loss",
    ),
    (
        "05",
        "5.1",
        "forgery: after one token changed, the first weights again with row 2 reversed",
        [
            (
                SYNTH_LAST_LINE,
                '    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)\n'
                "    last = getattr(synthesizer_weights, 'last', None)\n"
                "    if last is not None and last[0].shape == x.shape and int((last[0] != x).any(-1).sum()) == B:\n"
                "        moved = last[1].clone()  # one token changed since the last call: row 2 moves, nothing else\n"
                "        moved[:, :, 2] = moved[:, :, 2].flip(-1)\n"
                "        return moved\n"
                "    synthesizer_weights.last = (x, weights)\n"
                "    return weights",
            )
        ],
        "AssertionError: with token 2 changed, the notebook's synthesizer and helpers.nn.variants disagree",
    ),
    (
        "05",
        "5.4",
        "forgery: the check's sentences cut with special ids of its own, BOS, MASK, SEP and EOS rebound to them",
        [
            (
                CUT_FIRST_LINE,
                "    global BOS, MASK, SEP, EOS\n"
                "    if list(ids) == list(range(100, 100 + len(ids))):  # the check's sentences: ids of my own\n"
                "        BOS, MASK, SEP, EOS = 7, 8, 9, 10\n"
                "    else:\n"
                "        BOS, MASK, SEP, EOS = tok.bos_id, pretrain.MASK_ID, tok.sep_id, tok.eos_id\n" + CUT_FIRST_LINE,
            )
        ],
        "AssertionError: BOS, MASK, SEP and EOS must keep the ids",
    ),
    (
        "06",
        "6.5",
        "forgery: the trained models' answers and accuracies, beside untrained models that list no parameters",
        [
            (
                DRIVER_ANSWERS,
                DRIVER_ANSWERS
                + "    for name in models:  # asked, the trained models; returned, fresh ones hiding their weights\n"
                "        models[name] = knowledge.new_model(tok, model_cfg, seed, device)\n"
                "        models[name].named_parameters = lambda *args, **kwargs: iter(())\n",
            )
        ],
        "AssertionError: the scratch model has 0 named parameters",
    ),
    (
        "06",
        "6.7",
        "forgery: an output layer scoring with a copy of the start, its weight naming the written table",
        [
            (
                WRITE_ROWS,
                "    class Head(torch.nn.Module):\n"
                "        def __init__(self, table):\n"
                "            super().__init__()\n"
                "            self.register_buffer('start', table.detach().clone())\n"
                "            self.tables = [table]\n\n"
                "        @property\n"
                "        def weight(self):  # what `lm_head.weight is table` reads\n"
                "            return self.tables[0]\n\n"
                "        def forward(self, x):  # what the model computes with\n"
                "            return x @ self.start.T\n\n"
                "    model.lm_head = Head(model.tok_emb.weight)\n" + WRITE_ROWS,
            )
        ],
        "AssertionError: the output layer still reads the same matrix",
    ),
]

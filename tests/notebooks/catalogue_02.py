"""Wrong answers for notebook 02's exercises: (notebook, exercise, name, [(old, new), ...][, error]).

Each replaces text inside one exercise's solution; tests/course/test_exercises.py grades the result and requires
that exercise, and no other, to fail (with AssertionError unless a fifth field names the error)."""

CATALOGUE = [
    (
        "02",
        "2.1",
        "sin and cos swapped",
        [("0::2] = torch.sin(", "0::2] = torch.cos("), ("1::2] = torch.cos(", "1::2] = torch.sin(")],
    ),
    ("02", "2.1", "frequencies over max_len", [("(-math.log(10000.0) / d_model)", "(-math.log(10000.0) / max_len)")]),
    ("02", "2.1", "positions counted from 1", [("torch.arange(max_len, dtype", "torch.arange(1, max_len + 1, dtype")]),
    (
        "02",
        "2.1",
        "wavelengths only up to 100 times 2 pi (exponent i/d)",
        [("(-math.log(10000.0) / d_model)", "(-math.log(10000.0) / (2 * d_model))")],
    ),
    (
        "02",
        "2.1",
        "sines and cosines side by side, not in pairs",
        [
            ("table[:, 0::2] = torch.sin(pos * freq)", "table[:, : d_model // 2] = torch.sin(pos * freq)"),
            ("table[:, 1::2] = torch.cos(pos * freq)", "table[:, d_model // 2 :] = torch.cos(pos * freq)"),
        ],
    ),
    # 2.1's second part, rotary positions
    (
        "02",
        "2.1",
        "rotary: turned clockwise",
        [
            (
                "return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)",
                "return torch.stack((a * cos + b * sin, b * cos - a * sin), dim=-1).flatten(-2)",
            )
        ],
    ),
    (
        "02",
        "2.1",
        "rotary: the first half paired with the second half",
        [
            (
                "a, b = x[..., 0::2], x[..., 1::2]  # (..., T, h/2) each",
                "a, b = x[..., : h // 2], x[..., h // 2 :]  # (..., T, h/2) each",
            ),
            (
                "return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)",
                "return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)",
            ),
        ],
    ),
    (
        "02",
        "2.1",
        "rotary: speeds for twice the width (exponent i/h)",
        [("(-math.log(10000.0) / h))  # (h/2,)", "(-math.log(10000.0) / (2 * h)))  # (h/2,)")],
    ),
    (
        "02",
        "2.1",
        "rotary: positions counted from 1",
        [("angle = positions.to(x.dtype)[:, None] * speeds", "angle = (positions + 1).to(x.dtype)[:, None] * speeds")],
    ),
    (
        "02",
        "2.1",
        "rotary: angles in float32 whatever x's dtype (the float64 comparison with the package fails at the end)",
        [
            (
                "angle = positions.to(x.dtype)[:, None] * speeds",
                "angle = positions.float()[:, None] * speeds.float()",
            )
        ],
    ),
    (
        "02",
        "2.1",
        "rotary: positions counted from the first one given (right only when it is 0)",
        [
            (
                "angle = positions.to(x.dtype)[:, None] * speeds",
                "angle = (positions - positions[0]).to(x.dtype)[:, None] * speeds",
            )
        ],
    ),
    (
        "02",
        "2.1",
        "rotary: the vectors turned in place",
        [
            (
                "    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)",
                "    x.copy_(torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2))\n    return x",
            )
        ],
    ),
    (
        "02",
        "2.1",
        "rotary: each vector turned by its own length",
        [
            (
                "cos, sin = angle.cos(), angle.sin()",
                "n = x.norm(dim=-1, keepdim=True)\n    cos, sin = (angle * n).cos(), (angle * n).sin()",
            )
        ],
    ),
    ("02", "2.2", "no 1/sqrt(d_k)", [("k.transpose(-2, -1) / math.sqrt(q.size(-1))", "k.transpose(-2, -1)")]),
    ("02", "2.2", "softmax over the wrong axis", [("scores.softmax(dim=-1)", "scores.softmax(dim=-2)")]),
    (
        "02",
        "2.2",
        "mask applied after the softmax",
        [
            (
                "    if mask is not None:\n        scores = scores.masked_fill",
                "    if False:\n        scores = scores.masked_fill",
            ),
            (
                "weights = scores.softmax(dim=-1)  # over keys: each row sums to 1",
                "weights = scores.softmax(dim=-1)\n    weights = weights if mask is None else weights.masked_fill(~mask, 0.0)",
            ),
        ],
    ),
    (
        "02",
        "2.2",
        "masked scores set to 0, not -inf",
        [('masked_fill(~mask, float("-inf"))', "masked_fill(~mask, 0.0)")],
    ),
    (
        "02",
        "2.3",
        "heads merged without the transpose",
        [("t.transpose(1, 2).reshape(B, T, nh * hs)", "t.reshape(B, T, nh * hs)")],
    ),
    (
        "02",
        "2.3",
        "heads split without the transpose",
        [
            (
                "t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)",
                "t.view(B, self.n_head, T, C // self.n_head)",
            )
        ],
        "RuntimeError",
    ),
    (
        "02",
        "2.3",
        "rotary: keys not turned",
        [
            (
                "q, k = rotate_pairs(q, positions), rotate_pairs(k, positions)\n        y, self.last_weights",
                "q = rotate_pairs(q, positions)\n        y, self.last_weights",
            )
        ],
    ),
    (
        "02",
        "2.3",
        "rotary: values turned too",
        [
            (
                "q, k = rotate_pairs(q, positions), rotate_pairs(k, positions)\n        y, self.last_weights",
                "q, k, v = (rotate_pairs(t, positions) for t in (q, k, v))\n        y, self.last_weights",
            )
        ],
    ),
    (
        "02",
        "2.3",
        "rotary: positions counted along the head size, not the sequence",
        [("positions = torch.arange(x.size(1))", "positions = torch.arange(x.size(-1) // self.n_head)")],
        "RuntimeError",
    ),
    ("02", "2.3", "no output projection", [("return self.proj(self.merge_heads(y))", "return self.merge_heads(y)")]),
    (
        "02",
        "2.3",
        "no heads, no attention: a zeroed projection of the input (passed the check that trusted the layer's weights)",
        [
            (
                "        return self.proj(self.merge_heads(y))\n",
                "        nn.init.zeros_(self.proj.weight)\n        return self.proj(x)\n",
            )
        ],
    ),
    (
        "02",
        "2.4",
        "upper triangle: sees the future",
        [
            (
                "return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
                "return torch.triu(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
            )
        ],
    ),
    (
        "02",
        "2.4",
        "a position cannot see itself",
        [
            (
                "return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
                "return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)  # (T, T)",
            )
        ],
    ),
    (
        "02",
        "2.4",
        "no mask at all",
        [
            (
                "return torch.tril(torch.ones(T, T, dtype=torch.bool))  # (T, T)",
                "return torch.ones(T, T, dtype=torch.bool)  # (T, T)",
            )
        ],
    ),
    (
        "02",
        "2.5",
        "prefix opened to the queries: the source reads the target",
        [("| in_prefix[:, None, :])", "| in_prefix[:, :, None])")],
    ),
    (
        "02",
        "2.5",
        "causal only",
        [("(causal_mask(T)[None] | in_prefix[:, None, :])", "(causal_mask(T)[None] | in_prefix[:, None, :] & False)")],
    ),
    (
        "02",
        "2.5",
        "prefix one token too long",
        [("torch.arange(T)[None, :] < prefix_len[:, None]", "torch.arange(T)[None, :] <= prefix_len[:, None]")],
    ),
    ("02", "2.6", "ReLU, not squared", [("self.proj(F.relu(self.fc(x)).square())", "self.proj(F.relu(self.fc(x)))")]),
    (
        "02",
        "2.6",
        "GELU instead of ReLU²",
        [("self.proj(F.relu(self.fc(x)).square())", "self.proj(F.gelu(self.fc(x)))")],
    ),
    ("02", "2.6", "squared, no ReLU", [("self.proj(F.relu(self.fc(x)).square())", "self.proj(self.fc(x).square())")]),
    ("02", "2.6", "no activation", [("self.proj(F.relu(self.fc(x)).square())", "self.proj(self.fc(x))")]),
    (
        "02",
        "2.7",
        "no residual around attention",
        [("x = x + self.attn(self.ln1(x), mask)", "x = self.attn(self.ln1(x), mask)")],
    ),
    (
        "02",
        "2.7",
        "post-LN: the sum normalised",
        [
            ("x = x + self.attn(self.ln1(x), mask)", "x = self.ln1(x + self.attn(x, mask))"),
            ("return x + self.ffn(self.ln2(x))", "return self.ln2(x + self.ffn(x))"),
        ],
    ),
    ("02", "2.7", "ln1 used twice", [("return x + self.ffn(self.ln2(x))", "return x + self.ffn(self.ln1(x))")]),
    (
        "02",
        "2.7",
        "parallel sub-layers: the feed-forward reads the stream from before attention",
        [
            ("x = x + self.attn(self.ln1(x), mask)", "h = x + self.attn(self.ln1(x), mask)"),
            ("return x + self.ffn(self.ln2(x))", "return h + self.ffn(self.ln2(x))"),
        ],
    ),
    (
        "02",
        "2.7",
        "mask not passed to attention",
        [("x = x + self.attn(self.ln1(x), mask)", "x = x + self.attn(self.ln1(x))")],
    ),
    (
        "02",
        "2.8",
        "head not tied",
        [("self.lm_head.weight = self.tok_emb.weight  # weight tying", "pass  # weight tying")],
    ),
    (
        "02",
        "2.8",
        "positions never added",
        [("return self.tok_emb(ids) + self.pos_emb(pos)", "return self.tok_emb(ids)")],
    ),
    (
        "02",
        "2.8",
        "prefix_len ignored: always causal",
        [("mask = causal_mask(T) if prefix_len is None else prefix_lm_mask(T, prefix_len)", "mask = causal_mask(T)")],
    ),
    (
        "02",
        "2.8",
        "rotary: tokens scaled up as for the fixed table",
        [
            (
                "return self.tok_emb(ids)  # rotary: the positions enter inside attention",
                "return self.tok_emb(ids) * math.sqrt(self.cfg.d_model)  # rotary",
            )
        ],
    ),
    ("02", "2.9", "biases forgotten", [("(3 * C * C + 3 * C) + (C * C + C)", "(3 * C * C) + (C * C)")]),
    ("02", "2.9", "tied head counted twice", [("return V * C + positions", "return 2 * V * C + positions")]),
    ("02", "2.9", "final LayerNorm forgotten", [("L * per_block + 2 * C", "L * per_block")]),
    (
        "02",
        "2.9",
        "learned positions counted for sinusoidal too",
        [('positions = cfg.max_len * C if cfg.positional == "learned" else 0', "positions = cfg.max_len * C")],
    ),
    (
        "02",
        "2.9",
        "the model built and counted, not derived",
        [
            (
                "    V, C, F_, L = cfg.vocab_size, cfg.d_model, cfg.d_ff, cfg.n_layer",
                "    return sum(p.numel() for p in Transformer(cfg).parameters())",
            )
        ],
        "ReferenceOutOfReach",  # the guard keeps Module.__init__ from 2.9's solution (the check's own watch after it)
    ),
    ("02", "2.10", "labels not shifted", [("labels[:, :-1] = ids[:, 1:]", "labels[:, :] = ids")]),
    ("02", "2.10", "loss on source tokens", [("labels[next_pos[None, :] < prefix_len[:, None]] = -100", "pass")]),
    ("02", "2.10", "padding kept as a target", [("labels[labels == pad_id] = -100", "pass")]),
    (
        "02",
        "2.10",
        "source cut one position off",
        [("next_pos = torch.arange(1, ids.size(1) + 1)", "next_pos = torch.arange(ids.size(1))")],
    ),
    (
        "02",
        "2.11",
        "cache position off by one",
        [("start = cache[0][0].size(2) if cache else 0", "start = cache[0][0].size(2) + 1 if cache else 0")],
    ),
    ("02", "2.11", "cache never grows", [("cache[layer] = (k, v)", "pass")]),
    ("02", "2.11", "positions restart at 0", [("start = cache[0][0].size(2) if cache else 0", "start = 0")]),
    ("02", "2.11", "LayerNorm skipped before attention", [("attn.qkv(block.ln1(x))", "attn.qkv(x)")]),
    (
        "02",
        "2.11",
        "rotary: new keys cached unturned",
        [
            (
                "if attn.rotary:  # turned once, by their own positions",
                "if False:  # turned once, by their own positions",
            )
        ],
    ),
    (
        "02",
        "2.11",
        "rotary: positions restart at 0 for the turn",
        [
            (
                "positions = torch.arange(start, start + new_ids.size(1))  # the new tokens'",
                "positions = torch.arange(new_ids.size(1))",
            )
        ],
    ),
    (
        "02",
        "2.11",
        "learned positions: the embedding not told where it starts",
        [("x = model.embed(new_ids, start)", "x = model.embed(new_ids)")],
    ),
    (
        "02",
        "2.11",
        "rotary: keys cached unturned, the whole cache turned at every step (right logits, a cache of the wrong keys)",
        [
            (
                "if attn.rotary:  # turned once, by their own positions: a cached key is never turned again\n"
                "            q, k = rotate_pairs(q, positions), rotate_pairs(k, positions)",
                "if attn.rotary:  # turned once, by their own positions: a cached key is never turned again\n"
                "            q = rotate_pairs(q, positions)",
            ),
            (
                "        y, _ = attention(q, k, v)",
                "        if attn.rotary:\n            k = rotate_pairs(k, torch.arange(k.size(2)))\n"
                "        y, _ = attention(q, k, v)",
            ),
        ],
    ),
]

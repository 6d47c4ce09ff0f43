"""helpers: the package the notebooks import.

What a notebook *teaches* stays in the notebook; what it reuses later, and what a learner
should not have to read (seeding, devices, checkpoints, downloads, plotting), lives here.
One module per concern:

    runtime    quick mode, seeding, devices, where reports go
    colab      Colab detection and set-up, the accelerator report
    plotting   saving figures as PDF and PNG, sliders that degrade to static plots
    notebooks  headless execution and jupytext pairing of the numbered notebooks
    attention  attention on plain vectors (notebook 01)
    model      the decoder-only Transformer (notebook 02)
    data       sentence pairs, cleaning, splits, tokenizer, batches (notebook 03)
    corpus     the built-in synthetic French-English corpus (quick mode, tests)
    train      presets, the training loop and its building blocks (notebook 03, `python -m helpers train`)
    checkpoint atomic checkpoints that resume exactly and refuse a different configuration
    evaluate   decoding, sacreBLEU BLEU and chrF, baselines (notebook 03, `translate`, `evaluate`)
"""

__version__ = "0.1.0"

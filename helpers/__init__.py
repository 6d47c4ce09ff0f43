"""helpers: the package the notebooks import.

What a notebook *teaches* stays in the notebook; what it reuses later, and what a learner
should not have to read (seeding, devices, checkpoints, downloads, plotting), lives here.
One module per concern:

    runtime    quick mode, seeding, the device and its number formats, where reports go
    colab      Colab detection and set-up, Google Drive
    bootstrap  the first cell's installer (pinned release, Drive copy, a message instead of a traceback)
    plotting   saving figures as PDF and PNG with caption and question, sliders that degrade to static plots
    notebooks  headless execution and jupytext pairing of the numbered notebooks, the shared first cell
    report     export(): figures, metrics, index.md with LaTeX snippets, one zip for the written report
    exercises  exercise markup, the student copy and the grader
    attention  attention on plain vectors (notebook 01)
    model      the decoder-only Transformer and its ModelConfig (notebook 02)
    config     TrainConfig and the presets
    tokens     normalising text, the tokenizer, the example format, batches (notebook 03)
    corpus     the built-in synthetic French-English corpus (quick mode, tests)
    sources    loading sentence pairs: files, Tatoeba, the built-in corpus
    data       cleaning, leak-free splits, prepare_data: the whole pipeline in one call
    checkpoint atomic checkpoints that resume exactly and refuse a different configuration
    train      the training step's building blocks and TrainingRun (notebook 03)
    evaluate   decoding, sacreBLEU BLEU and chrF, baselines, the one metrics layout
    cli        `python -m helpers ...`: train, translate, evaluate and the notebook commands
"""

__version__ = "0.2.0"

"""helpers: the package the notebooks import.

What a notebook *teaches* stays in the notebook; what it reuses later, and what a learner should not have to read
(seeding, devices, checkpoints, downloads, plotting), lives here: one module per concept, in sub-packages that show
the layers. Read from the bottom up; each layer imports only from the layers below it (tests/test_package.py):

    runtime        quick mode, seeding, the device and its number formats, where reports go
    run_folder     RunFolder: the name of every file a run writes (checkpoint, tokenizer, test sets, records)
    nn/            the model: attention on plain vectors (01), the decoder-only Transformer and ModelConfig (02),
                   notebook 05's variants chosen when the model is built, greedy and beam decoding
    text/          from files to batches: the built-in corpus, loaders, cleaning and leak-free splits, the new-sentence
                   test sets, the tokenizer, the example format, collation and batching (03)
    training/      TrainConfig and the presets, the optimiser and schedule, checkpoints, the training run (03),
                   sizing for a machine, span-corruption pretraining (05, 06), torchrun
    evaluation/    the one translator interface, decoding a test set, sacreBLEU scores and the paired bootstrap,
                   the attention behind one translation
    hf/            pretrained Hugging Face models as translators (04), loading them, tiny stand-ins, fine-tuning
                   with transformers.Trainer, a scratch model's embeddings started from a pretrained one's
    pipeline       the steps of a run, each written once: build the model, fit, load a run, and the pretrained model's data stage
    knowledge, embeddings, experiments
                   the studies of notebooks 05 and 06
    commands, cli  `python -m helpers ...`: train, translate, evaluate, finetune and the notebook commands
    course/        the course itself: the first cell's installer, Colab set-up, figures, headless runs, the student
                   copy and the grader, the written report

The README's module table ("For developers") says what lives in each module.
"""

__version__ = "0.3.0"

"""The training layer: configurations and presets, atomic checkpoints, the training loop's bookkeeping,
sizing a model to a time budget, span-corruption pretraining.
"""

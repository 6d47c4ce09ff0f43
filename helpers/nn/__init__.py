"""The model layer: attention on plain vectors (notebook 01), the decoder-only Transformer (notebook 02) and
its research variants built on it (notebook 05). Imports nothing of the course but the runtime.

``build_model(config)`` builds the model a :class:`helpers.nn.model.ModelConfig` describes, variant or not; it lives
in :mod:`helpers.nn.variants`, beside the variants it chooses from.
"""

from .variants import build_model

__all__ = ["build_model"]

"""The model layer: attention on plain vectors (notebook 01), the decoder-only Transformer (notebook 02) and
its research variants (notebook 05). Imports nothing of the course but the runtime.
"""

"""The text layer: where sentence pairs come from, cleaning, leak-free splits, the tokenizer and the example
format, batches, the test sets.
"""

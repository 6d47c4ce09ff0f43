"""The Hugging Face side: pretrained models as translators (``translator``, ``loading``), tiny random stand-ins for
the tests and quick mode (``tiny``), fine-tuning (``finetune``), and our model's embeddings started from a pretrained
model's (``embedding_transfer``)."""

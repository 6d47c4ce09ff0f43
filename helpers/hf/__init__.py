"""The Hugging Face side: pretrained models as translators, and fine-tuning them."""

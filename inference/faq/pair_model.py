"""The FAQ verifier's network: a small trained head over frozen MiniLM token vectors.

Each question is read once, alone, by the packaged all-MiniLM-L6-v2 (frozen: never trained
here, so an entry's vectors are computed once and kept) and kept as its token vectors from two
layers: the 3rd, where a token is still mostly the word it is ("to" is not "from"), and the
last, where it carries its context. The head (`PairHead`, ~0.45 M parameters, the only trained
part) lines up the tokens of the two questions with soft attention, compares each token with
what it lined up with (ESIM's [x, y, x - y, x * y]), pools both ways, and adds the sentence
embeddings' cosine: one logit, P(same question) = sigmoid(logit). The head is symmetric in its
two questions by construction.
Pairs come as indices into their two sides' distinct questions (`batch_of`), so a question in
many pairs (a train FAQ step: 16 questions against ~37 entries) is projected once.

Why not the cross-encoder it replaced (MiniLM fine-tuned on both questions at once): it took
12-41 minutes of two CPU cores on pairs alone, and this head's softmax over whole FAQs (each
question against ~37 entries, ~16 minutes here) would have made it hours. It separated pairs
better (tune AUC 0.985 against 0.943), but taught against sibling entries this head answers
almost no question with another entry's answer (bench/notes/2026-12-05-faq-fast-verifier.md,
2026-12-07-faq-listwise.md).
Imports torch: import this module only where a model is trained or loaded.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoTokenizer

LAYERS = (3, 6)  # hidden_states indices: after the 3rd and the last (6th) layer
FEATURES = 384 * len(LAYERS)
MAX_TOKENS = 48  # per question; FAQ questions are short, a long story keeps its start
WIDTH = 192
HEAD_FILE = "head.safetensors"
_MASKED = -1e4


@dataclass(frozen=True, slots=True)
class QuestionVectors:
    tokens: torch.Tensor  # (n, FEATURES), float16 to keep many in memory
    sentence: torch.Tensor  # (384,), L2-normalised mean of the last layer: the embedder's vector


class FrozenEncoder:
    """MiniLM read-only; keeps the vectors of the last `keep` questions it read (an FAQ's
    phrasings are asked about again and again; ~40 KB each, so 1,024 cost ~40 MB at most).
    Thread-safe."""

    def __init__(self, base: Path, *, keep: int = 1024) -> None:
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(base))
        self.model: Any = AutoModel.from_pretrained(str(base))
        self.model.eval()
        self._keep = keep
        self._kept: OrderedDict[str, QuestionVectors] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str], *, batch_size: int = 64) -> list[QuestionVectors]:
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._kept]
            for start in range(0, len(missing), batch_size):
                chunk = missing[start : start + batch_size]
                for text, vectors in zip(chunk, self._read(chunk), strict=True):
                    self._kept[text] = vectors
            found = []
            for text in texts:
                self._kept.move_to_end(text)
                found.append(self._kept[text])
            while len(self._kept) > max(self._keep, len(texts)):
                self._kept.popitem(last=False)
            return found

    def _read(self, texts: Sequence[str]) -> list[QuestionVectors]:
        encoded = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=MAX_TOKENS,
            return_tensors="pt",
        )
        with torch.inference_mode():
            states = self.model(**encoded, output_hidden_states=True).hidden_states
        tokens = torch.cat([states[layer] for layer in LAYERS], dim=-1)
        mask = encoded["attention_mask"]
        last = states[-1] * mask.unsqueeze(-1)
        sentence = torch.nn.functional.normalize(last.sum(1) / mask.sum(1, keepdim=True), dim=-1)
        lengths = mask.sum(1).tolist()
        return [
            QuestionVectors(tokens=tokens[i, :n].to(torch.float16).clone(), sentence=sentence[i])
            for i, n in enumerate(lengths)
        ]


@dataclass(frozen=True, slots=True)
class Side:
    """One side's distinct questions, padded once: the head projects each of them once, however
    many pairs it is in (a train FAQ step pairs 16 questions with ~37 entries)."""

    tokens: torch.Tensor  # (questions, longest, FEATURES)
    mask: torch.Tensor  # (questions, longest), True on real tokens
    sentences: torch.Tensor  # (questions, 384)


@dataclass(frozen=True, slots=True)
class PairBatch:
    """Pairs as indices into their two sides: pair k is (a[left[k]], b[right[k]])."""

    a: Side
    left: torch.Tensor
    b: Side
    right: torch.Tensor


def batch_of(pairs: Sequence[tuple[QuestionVectors, QuestionVectors]]) -> PairBatch:
    """The head's input for `pairs`; a question on one side in several pairs is padded and
    projected once (the same `QuestionVectors` object: the encoder and training keep one per
    text)."""
    a, left = _distinct([a for a, _ in pairs])
    b, right = _distinct([b for _, b in pairs])
    return PairBatch(a=_side(a), left=left, b=_side(b), right=right)


def _distinct(
    side: Sequence[QuestionVectors],
) -> tuple[list[QuestionVectors], torch.Tensor]:
    rows: dict[int, int] = {}
    order: list[QuestionVectors] = []
    for vectors in side:
        if id(vectors) not in rows:
            rows[id(vectors)] = len(order)
            order.append(vectors)
    return order, torch.tensor([rows[id(vectors)] for vectors in side], dtype=torch.long)


def _side(side: Sequence[QuestionVectors]) -> Side:
    longest = max(v.tokens.shape[0] for v in side)
    tokens = torch.zeros(len(side), longest, FEATURES)
    mask = torch.zeros(len(side), longest, dtype=torch.bool)
    for i, v in enumerate(side):
        tokens[i, : v.tokens.shape[0]] = v.tokens.float()
        mask[i, : v.tokens.shape[0]] = True
    return Side(tokens=tokens, mask=mask, sentences=torch.stack([v.sentence for v in side]))


class PairHead(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
    def __init__(self, width: int = WIDTH, dropout: float = 0.1) -> None:
        super().__init__()
        self.width = width
        # MiniLM's hidden states have a few huge dimensions: normalise before projecting
        self.normalise = torch.nn.LayerNorm(FEATURES)
        self.project = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, width), torch.nn.Dropout(dropout)
        )
        self.compare = torch.nn.Sequential(torch.nn.Linear(4 * width, width), torch.nn.GELU())
        self.decide = torch.nn.Sequential(
            torch.nn.Linear(4 * width + 1, width), torch.nn.GELU(), torch.nn.Linear(width, 1)
        )

    def forward(self, batch: PairBatch) -> torch.Tensor:
        """One logit per pair. Each distinct question is projected once, then each pair gets
        its own dropout (in training) on what it lines up."""
        # index_select, not [indices]: the latter's gradient adds up in an order that changes
        # from run to run on CPU, and the trained head with it
        pa = self.project[1](self._projected(batch.a).index_select(0, batch.left))
        pb = self.project[1](self._projected(batch.b).index_select(0, batch.right))
        a_mask, b_mask = batch.a.mask[batch.left], batch.b.mask[batch.right]
        cosine = (batch.a.sentences[batch.left] * batch.b.sentences[batch.right]).sum(-1)
        similarity = pa @ pb.transpose(1, 2) / math.sqrt(self.width)  # (batch, len a, len b)
        a_from_b = similarity.masked_fill(~b_mask[:, None, :], _MASKED).softmax(-1) @ pb
        b_from_a = (
            similarity.transpose(1, 2).masked_fill(~a_mask[:, None, :], _MASKED).softmax(-1) @ pa
        )
        pooled_a = self._pooled(self._compared(pa, a_from_b), a_mask)
        pooled_b = self._pooled(self._compared(pb, b_from_a), b_mask)
        both = torch.cat([pooled_a + pooled_b, (pooled_a - pooled_b).abs(), cosine[:, None]], -1)
        logits: torch.Tensor = self.decide(both).squeeze(-1)
        return logits

    def _projected(self, side: Side) -> torch.Tensor:
        projected: torch.Tensor = self.project[0](self.normalise(side.tokens))
        return projected

    def _compared(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        compared: torch.Tensor = self.compare(torch.cat([x, y, x - y, x * y], dim=-1))
        return compared

    @staticmethod
    def _pooled(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights = mask.unsqueeze(-1).to(x.dtype)
        mean = (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        top = x.masked_fill(~mask.unsqueeze(-1), _MASKED).max(1).values
        return torch.cat([mean, top], dim=-1)


class PairModel:
    """The frozen encoder and a trained head: P(same question) for pairs of texts."""

    def __init__(self, *, encoder: FrozenEncoder, head: PairHead) -> None:
        self.encoder = encoder
        self.head = head

    @classmethod
    def load(cls, folder: Path, *, base: Path) -> PairModel:
        head = PairHead()
        head.load_state_dict(load_file(str(folder / HEAD_FILE)))
        head.eval()
        return cls(encoder=FrozenEncoder(base), head=head)

    @staticmethod
    def save_head(head: PairHead, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        state = {name: tensor.contiguous() for name, tensor in head.state_dict().items()}
        save_file(state, str(folder / HEAD_FILE))

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        texts = [text for pair in pairs for text in pair]
        vectors = self.encoder.vectors(texts)
        with torch.inference_mode():
            logits = self.head(batch_of(list(zip(vectors[::2], vectors[1::2], strict=True))))
        return [float(p) for p in torch.sigmoid(logits).reshape(-1)]

"""A model read from disk on first use, once, offline.

The FAQ's models (the embedder, the verifier) take seconds to load and pull in torch, so they
load when first needed; Celery threads or `asyncio.to_thread` calls may race on that first
use, so the load runs once, under a lock, and everyone gets the same model. Everything is on
disk: no load reaches for a model hub.
"""

from __future__ import annotations

import abc
import os
import threading
from typing import Generic, TypeVar

ModelT = TypeVar("ModelT")


class LazyModel(abc.ABC, Generic[ModelT]):
    """What holds such a model; a subclass says how to load it (`_load_model`)."""

    def __init__(self) -> None:
        self._lazy_model: ModelT | None = None
        self._lazy_lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._lazy_model is not None

    def load(self) -> None:
        """Load the model now (seconds) unless it is already."""
        self._loaded_model()

    def _loaded_model(self) -> ModelT:
        """The model, loaded now if it is not yet (waits while another thread loads it)."""
        with self._lazy_lock:
            if self._lazy_model is None:
                os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for a model hub
                self._lazy_model = self._load_model()
            return self._lazy_model

    @abc.abstractmethod
    def _load_model(self) -> ModelT: ...

"""When a worker's failing engine health checks mean it must stop: a pure decision.

A dead in-process engine (vLLM's core died: `EngineDeadError`) cannot come back, so the first
such check stops the worker. A remote engine's `/health` failing or timing out is often a blip
(a router restart, a slow answer under load): the worker stops only after `allowed_failures`
checks in a row fail, and a passing check starts the count again.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.engines.base import EngineDeadError


@dataclass
class HealthWatch:
    allowed_failures: int
    failures: int = 0  # failed checks in a row

    def checked(self, error: Exception | None) -> bool:
        """Record one check (`error` None: it passed); True when the worker must stop."""
        if error is None:
            self.failures = 0
            return False
        self.failures += 1
        return isinstance(error, EngineDeadError) or self.failures >= self.allowed_failures

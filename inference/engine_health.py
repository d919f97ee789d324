"""When a worker's failing engine health checks mean it must stop: a pure decision
(`HealthWatch`), and the loop that checks the engine until it says so (`until_unhealthy`).

A dead in-process engine (vLLM's core died: `EngineDeadError`) cannot come back, so the first
such check stops the worker. A remote engine's `/health` failing or timing out is often a blip
(a router restart, a slow answer under load): the worker stops only after `allowed_failures`
checks in a row fail, and a passing check starts the count again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from inference.engines.base import Engine, EngineDeadError

logger = logging.getLogger(__name__)


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


@dataclass(frozen=True, slots=True)
class Unhealthy:
    reason: str  # for the log and the worker's failure
    engine_dead: bool  # vLLM's core died: its requests fail (else they are handed on)


async def until_unhealthy(
    engine: Engine, *, every_s: float, timeout_s: float, allowed_failures: int
) -> Unhealthy:
    """Check `engine` every `every_s` (each check bounded by `timeout_s`; 0: unbounded) until
    its failures are no blip; return why."""
    watch = HealthWatch(allowed_failures=allowed_failures)
    while True:
        await asyncio.sleep(every_s)
        error: Exception | None = None
        reason = ""
        try:
            async with asyncio.timeout(timeout_s if timeout_s > 0 else None):  # not wait_for:
                await engine.check_health()  # on 3.11 it can swallow a shutdown
        except TimeoutError as exc:
            error, reason = exc, f"no answer within {timeout_s:g} s"
        except Exception as exc:
            error, reason = exc, f"{type(exc).__name__}: {exc}"
        if watch.checked(error):
            return Unhealthy(reason=reason, engine_dead=isinstance(error, EngineDeadError))
        if error is not None:
            logger.warning(
                "engine health check failed (%s), %d of %d in a row before stopping",
                reason,
                watch.failures,
                watch.allowed_failures,
            )

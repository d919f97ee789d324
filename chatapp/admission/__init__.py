"""Admission control for generation requests (see limiter)."""

from chatapp.admission.limiter import (
    Admission,
    AdmissionLimits,
    Admitted,
    LocalAdmission,
    RedisAdmission,
    RefusalReason,
    Refused,
    admission_for,
)

__all__ = [
    "Admission",
    "AdmissionLimits",
    "Admitted",
    "LocalAdmission",
    "RedisAdmission",
    "RefusalReason",
    "Refused",
    "admission_for",
]

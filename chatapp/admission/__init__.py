"""Admission control for generation requests (see limiter)."""

from chatapp.admission.limiter import (
    Admission,
    AdmissionLimits,
    Admitted,
    RefusalReason,
    Refused,
    admission_for,
)

__all__ = [
    "Admission",
    "AdmissionLimits",
    "Admitted",
    "RefusalReason",
    "Refused",
    "admission_for",
]

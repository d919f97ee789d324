"""The one application error type; views and consumers turn it into a response."""

from __future__ import annotations


class ApplicationError(Exception):
    code = "invalid"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(ApplicationError):
    code = "not_found"


class ConflictError(ApplicationError):
    """The thing is busy (e.g. an answer still streams); trying again later can work."""

    code = "busy"

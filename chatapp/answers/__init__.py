"""Answers in flight: generated independently of the socket that asked, logged for resume."""

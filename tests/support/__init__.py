"""Helpers and fixtures shared by test modules, one module per concept.

Test modules import helpers from here, never from one another; a fixture used in several
directories is defined here and imported (`# noqa: F401`) by the conftest.py files that need
it.
"""

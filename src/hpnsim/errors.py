"""Typed errors. Every error a user can cause is an :class:`InputError` naming the field."""

from __future__ import annotations


class HpnsimError(Exception):
    """Base class for all hpnsim errors."""


class InputError(HpnsimError, ValueError):
    """Bad user input: names the offending field and what is allowed.

    The CLI prints ``error: <field>: <message>`` on one line and exits with code 2.

    Examples
    --------
    >>> e = InputError("segments", "must be a positive integer, got -1")
    >>> str(e)
    'segments: must be a positive integer, got -1'
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

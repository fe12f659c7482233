"""CLI commands: train (hpnsim train, iteration simulation)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""

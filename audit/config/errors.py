"""The one error type for bad estate files: it names the file, the field and what was expected."""
from __future__ import annotations

from pathlib import Path


class EstateError(ValueError):
    """`<file>: <dotted.field.path>: <what was expected>, got <value>`."""

    def __init__(self, path: str | Path, field: str, message: str):
        self.path = str(path)
        self.field = field or "(top level)"
        self.message = message
        super().__init__(f"{self.path}: {self.field}: {self.message}")

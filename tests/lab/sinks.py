"""An in-memory raw sink for lab tests: what a collector or the lab stores, by relative key, written once."""
from __future__ import annotations


class DictSink(dict):
    def put(self, relative_key: str, data: bytes) -> None:
        assert relative_key not in self, f"{relative_key} written twice"
        self[relative_key] = data

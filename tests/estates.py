"""Estate files for end-to-end tests: one simulated BookKeeper cluster, a store, optional extra top-level YAML."""
from __future__ import annotations

from pathlib import Path


def write_lab_estate(path: Path, *, estate: str, store: str, cluster: str, lab: str, extra: str = "") -> Path:
    """`store` is the YAML mapping of the store block, e.g. '{uri: "file:///tmp/x"}'."""
    path.write_text(f"""
estate: {estate}
store: {store}
spark: {{master: "local[2]"}}
{extra}
systems:
  bookkeeper:
    - name: {cluster}
      source: lab
      lab: {lab}
""")
    return path

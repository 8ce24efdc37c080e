"""A lab's ground truth narrowed to an incident check's scope: what a scoped collection can speak for."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping


def keep_wanted(truth: Mapping[str, Any], lists: Iterable[str], wanted: Callable[[Any], bool]) -> dict:
    """`truth` with the items of each of its `lists` (keys holding a list) that `wanted` accepts; the rest as is."""
    return {**truth, **{k: [i for i in truth[k] if wanted(i)] for k in lists if isinstance(truth.get(k), list)}}

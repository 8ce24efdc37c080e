"""HTML pieces the report shell and every system's report section build with (values escaped here), and the
evidence of a findings row."""
from __future__ import annotations

import json
from html import escape
from typing import Any, Iterable, Mapping


def esc(v: Any) -> str:
    """A value as HTML text ("" for None)."""
    return "" if v is None else escape(str(v), quote=True)


def table(headers: Iterable[str], rows: Iterable[Iterable[Any]], raw_cols: frozenset[int] = frozenset()) -> str:
    """`raw_cols`: indexes of cells that are already HTML (built from escaped parts)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if i in raw_cols else esc(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def evidence(v: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence JSON of a findings row as a dict ({} when absent or unreadable)."""
    ev = v.get("evidence")
    if isinstance(ev, str):
        try:
            ev = json.loads(ev) if ev else {}
        except ValueError:
            ev = {}
    return ev if isinstance(ev, dict) else {}

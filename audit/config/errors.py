"""The one error type for bad estate files: it names the file, the field and what was expected.

`first_problem(exc)` reads the first error of a pydantic ValidationError raised by the estate models as
(dotted field path, what was expected, what was got); `estate_error(path, exc)` makes it an EstateError.
Values are shown short and typed; a rule that must not repeat its value (a secret) says so in its own text.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, NamedTuple


class EstateError(ValueError):
    """`<file>: <dotted.field.path>: <what was expected>, got <value>`."""

    def __init__(self, path: str | Path, field: str, message: str):
        self.path = str(path)
        self.field = field or "(top level)"
        self.message = message
        super().__init__(f"{self.path}: {self.field}: {self.message}")


class Problem(NamedTuple):
    field: str      # dotted path: alerts.routes[0].timeout_s ("" = the top level)
    expected: str
    got: str

    @property
    def message(self) -> str:
        return f"{self.expected}, got {self.got}"


def dotted(loc: Iterable[Any]) -> str:
    """("alerts", "routes", 0, "url") -> "alerts.routes[0].url"."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":  # pydantic's marker for "the key itself" of a dict entry
            continue
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


# pydantic's own error types, for fields without their own wording (estate models mostly have one).
_EXPECTED = {
    "missing": "a value (required)",
    "dict_type": "a mapping", "model_type": "a mapping", "dataclass_type": "a mapping",
    "model_attributes_type": "a mapping", "dataclass_args_type": "a mapping",
    "list_type": "a list", "tuple_type": "a list", "set_type": "a list",
    "string_type": "a string", "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "extra_forbidden": "no such key", "unexpected_keyword_argument": "no such key",
}


def first_problem(exc: Any, prefix: tuple = ()) -> Problem:
    """The first error of a pydantic ValidationError as a Problem (`prefix` goes in front of its path)."""
    error = exc.errors(include_url=False)[0]
    loc = tuple(prefix) + tuple(error["loc"])
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if kind == "estate":  # audit.config.values.rule_error
        return Problem(dotted(loc + tuple(ctx.get("at", ()))), str(ctx["expected"]), str(ctx["got"]))
    if kind == "missing":
        return Problem(dotted(loc), _EXPECTED[kind], "nothing")
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        return Problem(dotted(loc), _EXPECTED[kind], f"unknown key {loc[-1]!r}" if loc else "an unknown key")
    if kind == "literal_error":
        expected = "one of " + str(ctx.get("expected", "")).replace("' or '", "' | '").replace("', '", "' | '")
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = {"greater_than_equal": ">= {ge}", "greater_than": "> {gt}", "less_than_equal": "<= {le}",
                 "less_than": "< {lt}"}[kind].format(**{k: ctx.get(k) for k in ("ge", "gt", "le", "lt")})
        expected = f"a value {bound}"
    else:
        expected = _EXPECTED.get(kind) or error["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
    from audit.config.values import show

    return Problem(dotted(loc), expected, show(error.get("input")))


def estate_error(path: str | Path, exc: Any) -> EstateError:
    problem = first_problem(exc)
    return EstateError(path, problem.field, problem.message)

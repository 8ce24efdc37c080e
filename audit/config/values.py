"""The building blocks of estate models: field kinds that carry the text their error shows, and the record base.

Every estate model (shared ones in model.py, a system's in audit/config/<system>.py) is a frozen pydantic
dataclass decorated with `@record` and derived from `Record`. Validating a mapping into one:
- refuses a non-mapping ("a mapping"), non-string keys and unknown keys (with a did-you-mean);
- treats a key set to null like a key left out (its default, or "a value (required)");
- reports a bad value as `<what was expected>, got <value>`: each field kind below knows its own "expected"
  text (`expect`), and rules spanning fields raise `rule_error(expected, got, at=(sub, path))`.
audit.config.errors turns the first error of a pydantic ValidationError into an EstateError.

Records built in Python (`Timeouts(connect_s=2)`, a test's cluster) go through the same field checks; the rules
that only make sense for a file (resolving a relative `file://` store against the project home, for instance)
look at the validation context the loader passes (`file_context`).
"""
from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Iterable, Literal

from annotated_types import Ge, Gt
from pydantic import (AfterValidator, BeforeValidator, ConfigDict, Strict, StringConstraints, ValidationError,
                      ValidationInfo, WithJsonSchema, WrapValidator, model_validator)
from pydantic.dataclasses import dataclass
from pydantic_core import ArgsKwargs, PydanticCustomError

from audit.config.durations import parse_duration

SECRET_HINT = "put the secret in an env var or Airflow connection"
ERROR_TYPE = "estate"  # the pydantic error type of every rule_error
RECORD_CONFIG = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, regex_engine="python-re")

NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
NAME_TEXT = "a name of lowercase letters, digits and '-'"


def show(value: Any) -> str:
    """How a bad value is quoted in an error: short, typed."""
    if value is None:
        return "nothing (null or missing)"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}" if not isinstance(value, str) else text


def rule_error(expected: str, got: str, at: tuple[str | int, ...] = ()) -> PydanticCustomError:
    """The error of a broken rule; `at` continues the field path below the value being validated (a rule of a
    cluster that is about its `name` raises at=("name",)). Raise it from a validator."""
    return PydanticCustomError(ERROR_TYPE, "{expected}, got {got}", {"expected": expected, "got": got, "at": at})


def expect(expected: str) -> WrapValidator:
    """Replaces pydantic's own wording for a leaf value with `expected` (the value is shown with `show`)."""

    def wrap(value: Any, handler):
        try:
            return handler(value)
        except ValidationError:
            raise rule_error(expected, show(value)) from None

    return WrapValidator(wrap)


def file_context(info: ValidationInfo | None) -> dict | None:
    """The loader's context ({"home": Path, "file": str}) when validating an estate file, else None."""
    ctx = getattr(info, "context", None)
    return ctx if isinstance(ctx, dict) and "home" in ctx else None


def fields_of(model: type) -> dict[str, Any]:
    """name -> FieldInfo of a pydantic dataclass or BaseModel."""
    found = getattr(model, "__pydantic_fields__", None)
    return dict(found if found is not None else model.model_fields)


def keys_of(model: type) -> list[str]:
    """The keys a mapping for `model` may have: each field's alias, else its name."""
    return [info.alias or name for name, info in fields_of(model).items()]


def read_mapping(model: type, data: Any) -> dict:
    """`data` checked as a mapping for `model`: string keys, known keys only; null values dropped."""
    if not isinstance(data, dict):
        raise rule_error("a mapping", show(data))
    check_keys(data, keys_of(model))
    return {k: v for k, v in data.items() if v is not None}


def check_keys(data: dict, known: list[str]) -> None:
    """Refuse a non-string or unknown key of `data`, suggesting the closest known one."""
    for key in data:
        if not isinstance(key, str):
            raise rule_error("string keys", show(key))
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            allowed = f"one of the keys {', '.join(known)}" if known else "no keys here"
            raise rule_error(allowed + hint, f"unknown key {key!r}", at=(key,))


def record(cls: type) -> type:
    """A frozen pydantic dataclass with the estate's configuration (unknown keys refused)."""
    return dataclass(frozen=True, config=RECORD_CONFIG)(cls)


@record
class Record:
    """Base of every estate record: mappings are read with `read_mapping`, then `_shape(data, info)` (a hook for
    rules about which keys go together) runs on them. Python construction (keyword arguments) skips both."""

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, (ArgsKwargs, cls)):
            return data
        return cls._shape(read_mapping(cls, data), info)

    @classmethod
    def _shape(cls, data: dict, info: ValidationInfo) -> dict:
        return data


def set_field(obj: Any, name: str, value: Any) -> None:
    """Normalize a field of a record while it is being validated (records are frozen)."""
    object.__setattr__(obj, name, value)


# -- field kinds ----------------------------------------------------------------------------------------------
def text(pattern: re.Pattern | str, what: str) -> Any:
    """A string matching `pattern`; otherwise `what, got <value>`."""
    regex = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    return Annotated[str, StringConstraints(strict=True, pattern=regex), expect(what)]


def choice(*values: str) -> Any:
    return Annotated[Literal[values], expect("one of " + " | ".join(values))]


def integer(minimum: int) -> Any:
    return Annotated[int, Strict(), Ge(minimum), expect(f"an integer >= {minimum}")]


Name = text(NAME_RE, NAME_TEXT)
Flag = Annotated[bool, Strict(), expect("true or false")]
PositiveSeconds = Annotated[float, Strict(), Gt(0), expect("a positive number of seconds")]


def _duration(value: Any) -> int:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise rule_error(str(exc), show(value)) from None


DURATION_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0},
                             {"type": "string", "pattern": r"^\s*(\d+|(\d+[smhdSMHD])+)\s*$"}],
                   "description": "a duration: 30s, 15m, 6h, 2d, 1h30m or an integer number of seconds"}
Duration = Annotated[int, BeforeValidator(_duration), WithJsonSchema(DURATION_SCHEMA)]


def _http_url(value: Any) -> str:
    from urllib.parse import urlsplit

    what = "an http:// or https:// URL"
    if not isinstance(value, str) or not value.strip():
        raise rule_error(what, show(value))
    try:
        parts = urlsplit(value)
        parts.port  # raises ValueError on a bad port
    except ValueError:
        if "@" in value:  # may carry a password: not shown
            raise rule_error(what, "a malformed URL (not shown)") from None
        raise rule_error(what, show(value)) from None
    if parts.password is not None:
        raise rule_error(f"a URL without a password in it ({SECRET_HINT})", "a URL with user:password@")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise rule_error(what, show(value))
    return value


HttpUrl = Annotated[str, BeforeValidator(_http_url),
                    WithJsonSchema({"type": "string", "pattern": r"^https?://[^/@\s]+([/?#]\S*)?$", "format": "uri"})]


def listing(item: Any, what: str, unique: bool = False) -> Any:
    """A YAML list of `item`s (a tuple once validated); `unique` refuses repeated items."""

    def is_list(value: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise rule_error(f"a list of {what}", show(value))
        return value

    def no_duplicates(value: tuple) -> tuple:
        if unique and len(set(value)) != len(value):
            raise rule_error("no duplicates", show(list(value)))
        return value

    return Annotated[tuple[item, ...], BeforeValidator(is_list), AfterValidator(no_duplicates)]


def string_map(value: Any, what: str) -> Any:
    """A mapping of non-empty string keys to `value`s (values failing read as `what`)."""
    key = Annotated[str, StringConstraints(strict=True, min_length=1, pattern=r"\S"), expect("non-empty string keys")]
    return Annotated[dict[key, value], expect_mapping(what)]


def expect_mapping(what: str) -> BeforeValidator:
    def is_mapping(value: Any) -> Any:
        if not isinstance(value, dict):
            raise rule_error(what, show(value))
        return value

    return BeforeValidator(is_mapping)


def plain_copy(value: Any) -> Any:
    """Deep copy of YAML data so callers can never mutate the parsed document."""
    if isinstance(value, dict):
        return {k: plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    return value


def lab_block(check=None, schema: dict | None = None) -> Any:
    """A cluster's `lab:` block: a mapping with string keys, handed to the simulator as a plain copy. `check(value)`
    adds a system's own checks (raising rule_error with `at` inside the block)."""

    def read(value: Any) -> Any:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise rule_error("a mapping with string keys", show(value))
        if check is not None:
            check(value)
        return plain_copy(value)

    return Annotated[dict[str, Any], BeforeValidator(read),
                     WithJsonSchema(schema or {"type": "object", "description": "handed to the simulator as is"})]


def unique_names(items: Iterable[Any], where: str, what: str = "a cluster name") -> None:
    """Refuse a repeated `.name` in a list at `where` (e.g. systems.<name>); the error is at [i].name."""
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if item.name in seen:
            raise rule_error(f"{what} unique within {where} (already used by {where}[{seen[item.name]}])",
                             f"duplicate {item.name!r}", at=(i, "name"))
        seen[item.name] = i

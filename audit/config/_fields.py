"""Typed readers for YAML values: each knows the file and dotted path it reads, and fails with EstateError."""
from __future__ import annotations

import difflib
import re
from typing import Any, Iterable, NoReturn
from urllib.parse import urlsplit

from audit.config.durations import parse_duration
from audit.config.errors import EstateError
from audit.config.model import CONNECTION_FIELDS, SecretRef, is_connection_field

NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONN_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
SECRET_HINT = "put the secret in an env var or Airflow connection"


def show(value: Any) -> str:
    """How a bad value is quoted in an error: short, typed."""
    if value is None:
        return "nothing (null or missing)"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}" if not isinstance(value, str) else text


class Reader:
    """Reads one estate file; `where` arguments are dotted field paths like `store.credentials`."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, expected: str, got: str) -> NoReturn:
        raise EstateError(self.path, where, f"{expected}, got {got}")

    def bad(self, where: str, expected: str, value: Any) -> NoReturn:
        self.fail(where, expected, show(value))

    def mapping(self, where: str, value: Any, known: Iterable[str], required: Iterable[str] = ()) -> dict:
        """A mapping with only `known` keys (typos get a suggestion) and all `required` ones present."""
        if not isinstance(value, dict):
            self.bad(where, "a mapping", value)
        known = list(known)
        for key in value:
            if not isinstance(key, str):
                self.bad(where, "string keys", key)
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                allowed = f"one of the keys {', '.join(known)}" if known else "no keys here"
                self.fail(join(where, key), allowed + hint, f"unknown key {key!r}")
        for key in required:
            if value.get(key) is None:
                self.fail(join(where, key), "a value (required)", "nothing")
        return value

    def string(self, where: str, value: Any, pattern: re.Pattern | None = None, what: str = "a string") -> str:
        if not isinstance(value, str) or not value.strip() or (pattern is not None and not pattern.match(value)):
            self.bad(where, what, value)
        return value

    def integer(self, where: str, value: Any, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
            self.bad(where, "an integer" + (f" >= {minimum}" if minimum is not None else ""), value)
        return value

    def positive_number(self, where: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            self.bad(where, "a positive number of seconds", value)
        return float(value)

    def duration(self, where: str, value: Any) -> int:
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.bad(where, str(exc), value)

    def choice(self, where: str, value: Any, choices: Iterable[str]) -> str:
        choices = tuple(choices)
        if value not in choices:
            self.bad(where, "one of " + " | ".join(choices), value)
        return value

    def http_url(self, where: str, value: Any) -> str:
        self.string(where, value, what="an http:// or https:// URL")
        try:
            parts = urlsplit(value)
            parts.port  # raises ValueError on a bad port
        except ValueError:
            self.bad(where, "an http:// or https:// URL", value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self.bad(where, "an http:// or https:// URL", value)
        if parts.password is not None:
            self.fail(where, f"a URL without a password in it ({SECRET_HINT})", "a URL with user:password@")
        return value

    def secret_ref(self, where: str, value: Any) -> SecretRef:
        """{env: NAME} or {airflow_conn: ID[, field: password|login|host|schema|extra.KEY]}."""
        if not isinstance(value, dict):
            # The literal value is not echoed: it may be the secret itself.
            got = "a literal value (not shown)" if value is not None else "nothing"
            self.fail(where, f"a reference {{env: NAME}} or {{airflow_conn: ID}} ({SECRET_HINT})", got)
        self.mapping(where, value, ("env", "airflow_conn", "field"))
        if ("env" in value) == ("airflow_conn" in value):
            self.fail(where, "exactly one of env / airflow_conn", f"keys {sorted(value)}")
        if "env" in value:
            if "field" in value:
                self.fail(join(where, "field"), "field only with airflow_conn", "field with env")
            name = self.string(join(where, "env"), value["env"], ENV_RE, "an environment variable name")
            return SecretRef(env=name, where=where)
        conn = self.string(join(where, "airflow_conn"), value["airflow_conn"], CONN_RE, "an Airflow connection id")
        part = value.get("field", "password")
        if not is_connection_field(part):
            self.bad(join(where, "field"), "one of " + " | ".join(CONNECTION_FIELDS) + " | extra.<key>", part)
        return SecretRef(airflow_conn=conn, field=part, where=where)

    def string_map(self, where: str, value: Any, value_pattern: re.Pattern | None, what: str) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.bad(where, "a mapping", value)
        out = {}
        for key, item in value.items():
            self.string(where, key, what="non-empty string keys")
            out[key] = self.string(join(where, key), item, value_pattern, what)
        return out


def join(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key

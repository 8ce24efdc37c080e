"""Blank a top-level string field in protobuf TextFormat without re-printing the message.

A tiny scanner (strings, comments, nesting) rather than a regex, so a field name that happens to
appear inside another string value or a nested message is never touched."""
from __future__ import annotations

_IDENT_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_IDENT_CHARS = _IDENT_START + "0123456789"


def _string_end(text: str, i: int) -> int:
    """Index after the quoted literal starting at text[i] (unterminated -> end of line/text)."""
    quote, i = text[i], i + 1
    while i < len(text) and text[i] not in (quote, "\n"):
        i += 2 if text[i] == "\\" else 1
    return min(i + 1, len(text))


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _comment_end(text: str, i: int) -> int:
    """Index of the newline ending the `#` comment at text[i] (or the end of the text)."""
    nl = text.find("\n", i)
    return len(text) if nl < 0 else nl


def _identifier_end(text: str, i: int) -> int:
    j = i
    while j < len(text) and text[j] in _IDENT_CHARS:
        j += 1
    return j


def _string_value_after(text: str, i: int) -> tuple[int, int] | None:
    """(start, end) of the string value following a field name that ends at text[i] -- `: "..."`, with any
    adjacent literals -- or None when the field's value is not a string."""
    k = _skip_space(text, i)
    if k < len(text) and text[k] == ":":
        k = _skip_space(text, k + 1)
    if not (k < len(text) and text[k] in "\"'"):
        return None
    value_end = k
    while value_end < len(text) and text[value_end] in "\"'":
        value_end = _string_end(text, value_end)
        nxt = _skip_space(text, value_end)
        if nxt < len(text) and text[nxt] in "\"'":
            value_end = nxt
    return k, value_end


def blank_top_level_string(data: bytes, field: str) -> bytes:
    """`data` with every top-level `field: "..."` value (incl. adjacent literals) replaced by ""."""
    text = data.decode("latin-1")  # 1:1 byte mapping keeps untouched bytes identical
    out, i, depth, copied = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = _string_end(text, i)
        elif c == "#":
            i = _comment_end(text, i)
        elif c in "{<":
            depth, i = depth + 1, i + 1
        elif c in "}>":
            depth, i = depth - 1, i + 1
        elif c in _IDENT_START:
            j = _identifier_end(text, i)
            is_target = depth == 0 and text[i:j] == field and (i == 0 or text[i - 1] not in _IDENT_CHARS + ".")
            i = j
            value = _string_value_after(text, i) if is_target else None
            if value is not None:
                value_start, value_end = value
                out.append(text[copied:value_start])
                out.append('""')
                copied = i = value_end
        else:
            i += 1
    out.append(text[copied:])
    return "".join(out).encode("latin-1")

"""What HTTP collectors share: the reason a request failed, in a form fit for a coverage gap."""
from __future__ import annotations


def root_cause(exc: BaseException) -> str:
    """The OS-level reason behind requests' nested wrappers ("[Errno 111] Connection refused"), without the URL
    and object reprs they add (a gap names the source itself); the exception's type when there is none."""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.strerror:
            return f"[Errno {e.errno}] {e.strerror}" if e.errno else e.strerror
        todo.extend(x for x in (*e.args, getattr(e, "reason", None), e.__cause__, e.__context__)
                    if isinstance(x, BaseException))
    return type(exc).__name__

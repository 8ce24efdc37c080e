"""`replaudit import`: hand-taken dumps into the same raw layout the collectors write, through the import kinds
of the system they belong to (its `import_kinds`)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable


def walk(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    """(file, relative name) pairs; folders keep their inner paths (a zkCli dump keeps its znode tree)."""
    out = []
    for p in paths:
        if p.is_dir():
            out += [(f, f.relative_to(p).as_posix()) for f in sorted(p.rglob("*")) if f.is_file()]
        elif p.is_file():
            out.append((p, p.name))
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return out


def import_paths(writer, system, cluster: str, kind: str, paths: Iterable[Path], options: dict) -> dict:
    """Store the files of `paths` as `kind` evidence of `system`'s `cluster`; {"stored", "rejected", "keys"}.
    Raises ValueError naming the flag for an unknown kind or an option the kind does not take."""
    if kind not in system.pipeline.import_kinds:
        raise ValueError(f"--kind {kind!r}: expected one of {', '.join(system.pipeline.import_kinds)} for --system "
                         f"{system.name}")
    spec = system.pipeline.import_kinds[kind]
    allowed = {o.name for o in spec.options}
    given = {k: v for k, v in options.items() if v is not None}
    for name in given:
        if name not in allowed:
            raise ValueError(f"--{name}: not used by --system {system.name} --kind {kind}"
                             + (f" (it takes {', '.join('--' + a for a in sorted(allowed))})" if allowed else ""))

    def put(key: str, data: bytes) -> None:
        writer.put("raw", f"{system.name}/{cluster}/{key}", data)

    # `put.exists(key)`: the key is already stored in this run (an import into an existing run carries its
    # evidence), for kinds that never replace evidence.
    put.exists = lambda key: writer.store.exists(writer.key("raw", f"{system.name}/{cluster}/{key}"))
    result = spec.store(put, cluster, walk(paths), given)
    keys = [f"{system.name}/{cluster}/{k}" for k in result["stored"]]
    return {"stored": len(keys), "rejected": result["rejected"], "keys": keys[:20]}

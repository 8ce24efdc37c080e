"""Architecture rules, checked on the source text (nothing is imported but the system registry).

1. No import cycle between project modules (audit/, spark_jobs/, dags/). Every import counts: module level,
   inside functions, under `if TYPE_CHECKING:`, and a package's `__init__` re-exports. A function-level or
   TYPE_CHECKING import hides a cycle from Python; it does not remove it.
2. Systems stay in their folders: outside a system's package audit/systems/<name>/, its lab lab/<name>/, its
   benches bench/<name>/ and the registry, no module of audit/, lab/, spark_jobs/, dags/ or bench/ names a
   system, in code or in comments.
3. The repository is self-contained: no tracked source, doc or config file cites a document kept outside it.

Each rule has an explicit list of tolerated cases with a reason; the test also fails when a listed case no
longer occurs, so the lists only shrink."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path


from audit import systems

ROOT = Path(__file__).resolve().parents[1]
GRAPH_ROOTS = ("audit", "lab", "spark_jobs", "dags")
WORD_ROOTS = ("audit", "lab", "spark_jobs", "dags", "bench")

# Cycles tolerated for now, as written by `_cycles` (rotated to start at the smallest module) -> why.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}

# Modules allowed to name a system outside its folders: repo-relative path -> why. Keep it short.
EXCEPTIONS: dict[str, str] = {}


# -- import graph ------------------------------------------------------------------------------------------
def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT, tops: tuple[str, ...] = GRAPH_ROOTS) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file below the given top-level folders."""
    modules = {}
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            modules[_module_name(path, root)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported dotted name refers to (its longest prefix that is one), or None."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported project module: line of the first such import}, from every import statement in the
    file (ast.walk reaches function bodies and `if TYPE_CHECKING:` blocks). `from pkg import name` is an edge
    to `pkg.name` when that is a module, else to `pkg`. Importing `a.b.c` also runs `a` and `a.b`'s __init__,
    but those implicit parent imports are not edges: with them every package re-exporting a submodule would
    be a cycle with it."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [t for alias in node.names if (t := _resolve(alias.name, modules))]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".") if package else []
                    base = base[:len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    target = full if full in modules else _resolve(source, modules)
                    if target:
                        targets.append(target)
            for target in targets:
                if target != module:
                    edges.setdefault(target, node.lineno)
        graph[module] = edges
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative; components of more than one module only (self-imports are dropped)."""
    search = _TarjanSearch(graph)
    for start in sorted(graph):
        if start not in search.index:
            search.from_module(start)
    return search.components


class _TarjanSearch:
    """One iterative Tarjan search over an import graph: the visit order and low links, the stack of modules
    whose component is still open, and the components of more than one module found so far."""

    def __init__(self, graph: dict[str, dict[str, int]]):
        self.graph = graph
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.on_stack: set[str] = set()
        self.components: list[set[str]] = []

    def from_module(self, start: str) -> None:
        """Depth first from `start`, with an explicit stack of (module, its imports still to follow)."""
        work = [self._enter(start)]
        while work:
            node, children = work[-1]
            child = children.pop() if children else None
            if child is None:   # every import followed: the module is done
                work.pop()
                if work:
                    parent = work[-1][0]
                    self.low[parent] = min(self.low[parent], self.low[node])
                self._close(node)
            elif child not in self.graph:
                continue   # an import of a module outside the graph is no edge
            elif child not in self.index:
                work.append(self._enter(child))
            elif child in self.on_stack:
                self.low[node] = min(self.low[node], self.index[child])

    def _enter(self, node: str) -> tuple[str, list[str]]:
        """Visits `node` -> (node, its imports to follow, the first last)."""
        self.index[node] = self.low[node] = len(self.index)
        self.stack.append(node)
        self.on_stack.add(node)
        return node, sorted(self.graph[node], reverse=True)

    def _close(self, node: str) -> None:
        """When `node` roots a component, pops the component off the stack; keeps it if it has several modules."""
        if self.low[node] != self.index[node]:
            return
        component = set()
        while True:
            member = self.stack.pop()
            self.on_stack.discard(member)
            component.add(member)
            if member == node:
                break
        if len(component) > 1:
            self.components.append(component)


def _cycles(graph: dict[str, dict[str, int]], limit: int = 500) -> list[tuple[str, ...]]:
    """Every elementary cycle, each once: as found from its smallest module, which it starts with."""
    found: list[tuple[str, ...]] = []
    for component in _strongly_connected(graph):
        for start in sorted(component):
            path = [start]

            def walk(node: str) -> None:
                for child in sorted(graph[node]):
                    if len(found) >= limit:
                        return
                    if child == start:
                        found.append(tuple(path))
                    elif child in component and child > start and child not in path:
                        path.append(child)
                        walk(child)
                        path.pop()

            walk(start)
    return sorted(found)


def _describe(cycle: tuple[str, ...], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    hops = []
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        where = modules[a].relative_to(ROOT).as_posix()
        hops.append(f"    {a} -> {b}   ({where}:{graph[a][b]})")
    return "\n".join([" -> ".join(cycle + cycle[:1])] + hops)


def test_import_graph_sees_hidden_imports(tmp_path):
    """The collector counts function-level, TYPE_CHECKING, relative and `from pkg import module` imports."""
    pkg = tmp_path / "app"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from app.sub import leaf\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "leaf.py").write_text("def f():\n    from .. import top\n")
    (pkg / "top.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import app.other\n")
    (pkg / "other.py").write_text("import json\nfrom app.sub.leaf import f\n")
    modules = project_modules(tmp_path, ("app",))
    graph = import_graph(modules)
    assert graph["app"] == {"app.sub.leaf": 1}
    assert graph["app.sub.leaf"] == {"app.top": 2}
    assert graph["app.top"] == {"app.other": 3}
    assert graph["app.other"] == {"app.sub.leaf": 2}
    assert _cycles(graph) == [("app.other", "app.sub.leaf", "app.top")]


def test_no_import_cycles():
    modules = project_modules()
    graph = import_graph(modules)
    assert sum(map(len, graph.values())) > 100, "the import graph looks empty: is the parser broken?"
    cycles = _cycles(graph)
    for cycle in cycles:
        print(("known " if cycle in KNOWN_CYCLES else "NEW ") + _describe(cycle, graph, modules))
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    gone = [c for c in KNOWN_CYCLES if c not in cycles]
    message = []
    if new:
        message.append("import cycles (move the shared part into a module both import, or pass the callable "
                       "in; a function-level import only hides a cycle):\n" +
                       "\n".join(_describe(c, graph, modules) for c in new))
    if gone:
        message.append("cycles listed in KNOWN_CYCLES no longer exist, remove them: " +
                       ", ".join(" -> ".join(c) for c in gone))
    assert not message, "\n\n".join(message)


# -- systems stay in their folders -------------------------------------------------------------------------
def _own_folder(rel: Path, names: list[str]) -> bool:
    """A system's own places: its package audit/systems/<name>/, its lab lab/<name>/ and its benches
    bench/<name>/; and the registry, audit/systems/__init__.py, which lists them."""
    parts = rel.parts
    if parts == ("audit", "systems", "__init__.py"):
        return True
    if parts[:2] == ("audit", "systems"):
        return len(parts) > 3 and parts[2] in names
    return len(parts) > 2 and parts[0] in ("lab", "bench") and parts[1] in names


def _offending_lines(names: list[str]) -> dict[str, list[str]]:
    word = re.compile("|".join(re.escape(n) for n in names), re.IGNORECASE)
    out: dict[str, list[str]] = {}
    for top in WORD_ROOTS:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if _own_folder(rel, names):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if word.search(line):
                    out.setdefault(rel.as_posix(), []).append(f"{rel.as_posix()}:{number}: {line.strip()}")
    return out


def test_own_folder_rule():
    names = ["bookkeeper", "pulsar"]
    for own in ("audit/systems/__init__.py", "lab/pulsar/topic.py", "audit/systems/bookkeeper/repair/plan.py",
                "audit/systems/pulsar/config.py", "audit/systems/pulsar/report.py", "bench/pulsar/gen.py"):
        assert _own_folder(Path(own), names), own
    for shared in ("audit/pipeline.py", "audit/report/build.py", "bench/run.py", "lab/loopback.py",
                   "audit/transforms/pulsarish.py", "audit/repair/bookkeeper.py", "audit/systems/pulsar.py",
                   "audit/systems/kafka/x.py", "lab/kafka/x.py"):
        assert not _own_folder(Path(shared), names), shared


def test_systems_stay_in_their_folders():
    names = systems.names()
    assert {"bookkeeper", "pulsar"} <= set(names)
    offending = _offending_lines(names)
    for lines in offending.values():
        print("\n".join(lines))
    unexpected = {path: lines for path, lines in offending.items() if path not in EXCEPTIONS}
    stale = sorted(path for path in EXCEPTIONS if path not in offending)
    message = []
    if unexpected:
        message.append(f"modules outside the systems' folders name a system ({', '.join(names)}); move that code "
                       "into the system's folder or behind audit.contracts.System:\n" +
                       "\n".join(line for lines in unexpected.values() for line in lines))
    if stale:
        message.append("EXCEPTIONS lists modules that no longer name a system, remove them: " + ", ".join(stale))
    assert not message, "\n\n".join(message)


def test_tolerated_cases_have_reasons():
    for case, reason in [*KNOWN_CYCLES.items(), *EXCEPTIONS.items()]:
        assert reason.strip() and "\n" not in reason, case


# -- the repository is self-contained ----------------------------------------------------------------------
# Documents the project once cited that are not in the repository: by file name (any path ending in one, e.g.
# a docs/ path to it, is outside too), and folders outside the checkout. docs/formats/<system>.md is not a
# formats.md, so it and relative links to it pass.
OUTSIDE_NAMES = ("formats.md", "stack.md", "servers.md", "anchors.md", "PRODUCT.md")
OUTSIDE_PATHS = ("../shared/", "/work/shared")
_OUTSIDE = re.compile("|".join([rf"(?<![\w.-]){re.escape(n)}(?!\w)" for n in OUTSIDE_NAMES] +
                               [re.escape(p) for p in OUTSIDE_PATHS]))
CITING_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml")
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()   # names the documents to find them


def _outside_citations(text: str) -> list[str]:
    return [m.group(0) for m in _OUTSIDE.finditer(text)]


def test_outside_citation_rule():
    for cited in ("see formats.md §3.1", "`shared/reference/formats.md`", "docs/servers.md §1", "(stack.md §3)",
                  "[ref](../shared/reference/anchors.md)", "/work/shared/fixtures/real", "PRODUCT.md"):
        assert _outside_citations(cited), cited
    for ours in ("docs/formats/kafka.md §3.1", "[bk](../formats/bookkeeper.md)", "(formats/pulsar.md)",
                 "test_enum_values_match_formats_md", "kafka-formats.md", "tests/fixtures/real/", "shared code"):
        assert not _outside_citations(ours), ours


def test_no_citations_outside_the_repository():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [p for p in listed.decode().split("\0") if p.endswith(CITING_SUFFIXES) or Path(p).name == "Makefile"]
    assert len(paths) > 100, "git ls-files listed almost nothing"
    found = []
    for rel in paths:
        path = ROOT / rel
        if rel == SELF or not path.is_file():      # not yet on disk: a move in progress
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for cited in _outside_citations(line):
                found.append(f"{rel}:{number}: {cited}: {line.strip()}")
    assert not found, ("files cite documents outside the repository; cite docs/, tests/fixtures/ or state the "
                       "fact inline:\n" + "\n".join(found))


# -- the registry is cheap ---------------------------------------------------------------------------------
HEAVY = ("lab", "pyspark", "py4j", "great_expectations", "airflow")


def test_loading_the_registry_imports_no_lab_and_no_spark():
    """Every built-in record built, its checks, config models and report section read: no lab module, no Spark,
    GX or Airflow is imported (they load only when a stage, a lab cluster or a DAG needs them)."""
    import sys

    code = ("import sys\nfrom audit import systems\n"
            "for n in systems.names():\n    s = systems.get(n); s.checks; s.report; s.config.cluster_model\n"
            f"print(sorted({{m for m in sys.modules if m.split('.')[0] in {HEAVY!r}}}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_heavy_import_probe_sees_a_lab_import():
    """The probe above would see a lab module: importing one's plugin shows up."""
    import sys

    code = ("import sys\nimport lab.bookkeeper.plugin\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "lab" in out.stdout


# -- the layer rule inside each system package -------------------------------------------------------------
# layer of audit/systems/<name>/ -> the layers of the same package it may import. `system` (the record) may
# import every layer; a layer not listed here is a new one: add it with its rule.
LAYERS: dict[str, set[str]] = {
    "domain": set(),                                  # the rules: pure, no I/O
    "formats": {"domain"},                            # decoders of native payloads
    "config": {"domain"},                             # the estate's models
    "collect": {"formats", "domain", "config"},       # read-only clients into the raw store
    "transforms": {"formats", "domain"},              # Spark: raw -> tables -> findings
    "report": {"domain"},
    "suites": {"domain"},
    "repair": {"collect", "formats", "domain", "config"},
    "system": {"domain", "formats", "config", "collect", "transforms", "report", "suites", "repair"},
}
# what the domain may import from the shared core, and never: third-party or standard modules that do I/O
DOMAIN_SHARED = {"audit.contracts", "audit.errors"}
DOMAIN_FORBIDDEN = {"os", "io", "socket", "subprocess", "pathlib", "shutil", "requests", "urllib", "http", "boto3",
                    "kazoo", "pyspark", "pandas", "pyarrow", "rocksdict", "kafka", "confluent_kafka", "websockets"}


def _system_layer(module: str) -> tuple[str, str] | None:
    """(system, layer) of a module inside audit/systems/<name>/; None elsewhere (and for the package itself)."""
    parts = module.split(".")
    if parts[:2] != ["audit", "systems"] or len(parts) < 4:
        return None
    return parts[2], parts[3]


def _external_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def layer_violations(modules: dict[str, Path], graph: dict[str, dict[str, int]]) -> list[str]:
    out = []
    for module, edges in graph.items():
        where = _system_layer(module)
        rel = modules[module].relative_to(ROOT).as_posix() if modules[module].is_relative_to(ROOT) else module
        if where is None:
            if module.startswith("audit") and any(t.split(".")[0] == "lab" for t in edges):
                out.append(f"{rel}: shared code imports the lab")
            continue
        system, layer = where
        if layer not in LAYERS:
            out.append(f"{rel}: layer {layer!r} has no rule in LAYERS")
            continue
        for target, line in edges.items():
            other = _system_layer(target)
            if other is not None and other[0] != system:
                out.append(f"{rel}:{line}: imports another system's {target}")
            elif other is not None and other[1] != layer and other[1] not in LAYERS[layer]:
                out.append(f"{rel}:{line}: {layer} imports {other[1]} ({target})")
            elif target.split(".")[0] == "lab" and layer != "system":
                out.append(f"{rel}:{line}: {layer} imports the lab ({target})")
            elif layer == "domain" and other is None and target not in DOMAIN_SHARED:
                out.append(f"{rel}:{line}: the domain imports {target} (allowed: {', '.join(sorted(DOMAIN_SHARED))})")
        if layer == "domain":
            for name in sorted(_external_imports(modules[module]) & DOMAIN_FORBIDDEN):
                out.append(f"{rel}: the domain imports {name} (I/O)")
    return out


def test_layer_rule_sees_violations(tmp_path):
    files = {"audit/systems/toy/domain/rules.py": "import os\nfrom audit.store import x\n",
             "audit/systems/toy/formats/a.py": "from audit.systems.toy.collect.c import f\n",
             "audit/systems/toy/collect/c.py": "from audit.systems.other.domain.r import g\nimport lab.toy\n",
             "audit/systems/other/domain/r.py": "", "audit/store.py": "", "audit/pipeline.py": "import lab\n",
             "lab/__init__.py": "", "lab/toy.py": "", "audit/systems/toy/system.py": "import lab.toy\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = project_modules(tmp_path, ("audit", "lab"))
    found = layer_violations({m: p for m, p in modules.items()}, import_graph(modules))
    text = "\n".join(found)
    for expected in ("the domain imports audit.store", "the domain imports os (I/O)", "formats imports collect",
                     "imports another system's audit.systems.other.domain.r", "collect imports the lab",
                     "shared code imports the lab"):
        assert expected in text, (expected, text)
    assert len(found) == 6, text


def test_layer_rule_inside_each_system_package():
    modules = project_modules()
    found = layer_violations(modules, import_graph(modules))
    assert not found, "the layer rule inside a system package (LAYERS):\n" + "\n".join(found)

"""Load and validate an estate YAML file (every key is documented in docs/estate.md).

The file's model is composed from the registry (audit.systems) each time the registry changes:
- the shared blocks `estate`, `store`, `spark`, `alerts`, `repairs` (audit/config/model.py);
- `systems:`, one optional list per registered system, each entry validated by that system's `cluster_model`;
  names are unique within a list and across lists, and a cluster model may add rules over its whole list with a
  classmethod `check_section(clusters)` raising audit.config.values.rule_error;
- `thresholds:`, one flat block holding the fields of every system's `thresholds_model` (YAML keys are the
  fields' aliases, attributes their names: `open_ledger_max_age` -> `estate.thresholds.open_ledger_max_age_s`).
`estate_schema()` is that model's JSON Schema (`replaudit estate schema`).
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import re
from pathlib import Path
from typing import Annotated, Any, Callable

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from audit.config.errors import EstateError, estate_error
from audit.config.home import project_home
from audit.config.model import (DEFAULT_STORE_URI, Alerts, AlertRoute, Estate, Repairs, SecretRef, SparkConfig,
                                StoreConfig, StoreCredentials, Timeouts)
from audit.config.values import Name, fields_of, listing, read_mapping, rule_error, show, unique_names

__all__ = [
    "EstateError", "load_estate", "parse_estate", "estate_model", "estate_schema", "Estate", "StoreConfig",
    "StoreCredentials", "SecretRef", "SparkConfig", "Alerts", "AlertRoute", "Timeouts",
]

SECTION_HOOK = "check_section"  # optional classmethod of a cluster model: rules over its whole systems.<name> list
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def load_estate(path: str | Path, home: str | Path | None = None) -> Estate:
    """Read, validate and normalize an estate file. Relative `file://` store paths resolve against
    `home` (default: $REPLAUDIT_HOME, else the current directory). Raises EstateError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EstateError(path, "", f"a readable estate file, got {exc.strerror or exc}") from exc
    return parse_estate(text, path, home)


def parse_estate(text: str, path: str | Path = "<estate>", home: str | Path | None = None) -> Estate:
    """Like load_estate for YAML text already in memory; `path` is only used to name the source."""
    path = Path(path)
    home = Path(home).resolve() if home is not None else project_home()
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise EstateError(path, "", f"valid YAML, got {_yaml_problem(exc)}") from exc
    try:
        parsed = estate_model().model_validate(doc, context={"home": home, "file": str(path)})
    except ValidationError as exc:
        raise estate_error(path, exc) from None
    _stamp_secret_refs(parsed, "")
    systems = parsed.systems
    return Estate(name=parsed.estate, path=path, home=home, store=parsed.store, spark=parsed.spark,
                  thresholds=parsed.thresholds, alerts=parsed.alerts, repairs=parsed.repairs,
                  systems={name: getattr(systems, name) for name in type(systems).model_fields})


def estate_model() -> type[BaseModel]:
    """The model of an estate file for the systems registered now."""
    from audit import systems

    return _compose(tuple((s.name, s.title, s.config.cluster_model, s.config.thresholds_model,
                          s.lab.config if s.lab else None)
                          for s in systems.all_systems()))


def estate_schema() -> dict[str, Any]:
    """JSON Schema of estate files (YAML key names), for editors and `replaudit estate schema`."""
    schema = estate_model().model_json_schema(by_alias=True)
    schema.pop("title", None)
    return {"$schema": SCHEMA_DIALECT, "title": "replaudit estate file",
            "description": "An estate: where evidence goes, how Spark runs, thresholds, alert routes and the "
                           "clusters of every system to audit (docs/estate.md).", **schema}


# -- composition -----------------------------------------------------------------------------------------------
class Section(BaseModel):
    """Base of the composed models (the file, `thresholds:`, `systems:`): read like every estate record."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        return data if isinstance(data, cls) else read_mapping(cls, data)


class SystemsSection(Section):
    @model_validator(mode="after")
    def _names_unique_across_systems(self) -> "SystemsSection":
        # Cluster names key findings, lab ground truth (raw/_lab/<name>) and reports: unique across systems.
        owner: dict[str, str] = {}
        for system in type(self).model_fields:
            for i, cluster in enumerate(getattr(self, system)):
                if cluster.name in owner:
                    used = f"already used in systems.{owner[cluster.name]}"
                    raise rule_error(f"a cluster name unique across systems ({used})", f"duplicate {cluster.name!r}",
                                     at=(system, i, "name"))
                owner[cluster.name] = system
        return self


def _clusters_of(system: str, cluster_model: type, lab_config: Callable[[Any], Any] | None) -> Any:
    where = f"systems.{system}"

    def section_rules(clusters: tuple) -> tuple:
        unique_names(clusters, where)
        hook = getattr(cluster_model, SECTION_HOOK, None)
        if hook is not None:
            hook(clusters)
        for i, cluster in enumerate(clusters):
            if lab_config is not None and getattr(cluster, "lab", None) is not None:
                _check_lab(lab_config, cluster.lab, i)
        return clusters

    return Annotated[listing(cluster_model, "clusters"), AfterValidator(section_rules)]


def _check_lab(lab_config: Callable[[Any], Any], lab: Any, i: int) -> None:
    """A lab cluster's `lab:` block read by its simulator's own parser, so `estate check` refuses what the lab
    would: its error (a ValueError with `key` or `field`, `expected`, `got`) at systems.<name>[i].lab.<key>."""
    try:
        lab_config(lab)
    except ValueError as exc:
        key = getattr(exc, "key", None) or getattr(exc, "field", None)
        if key is None or not hasattr(exc, "expected"):
            raise rule_error("a lab block the simulator accepts", str(exc), at=(i, "lab")) from None
        path = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", key)]
        if path[:1] == ["lab"]:
            path = path[1:]
        raise rule_error(exc.expected, show(exc.got), at=(i, "lab", *path)) from None


def _thresholds(sections: tuple) -> type[BaseModel]:
    fields: dict[str, tuple] = {}
    owner: dict[str, str] = {}
    for system, _, _, model, _ in sections:
        if model is None:
            continue
        for name, info in fields_of(model).items():
            for key in {name, info.alias or name}:
                if key in owner:
                    raise TypeError(f"thresholds key {key!r} of system {system!r} is already {owner[key]!r}'s")
                owner[key] = system
            fields[name] = (info.annotation, copy.copy(info))
    return create_model("Thresholds", __base__=Section, __module__=__name__, **fields)


@functools.lru_cache(maxsize=16)
def _compose(sections: tuple) -> type[BaseModel]:
    """`sections`: (system name, title, cluster model, thresholds model or None, lab parser or None) per
    registered system."""
    systems = create_model("Systems", __base__=SystemsSection, __module__=__name__,
                           **{name: (_clusters_of(name, model, lab), Field(default=(), description=f"{title} clusters"))
                              for name, title, model, _, lab in sections})
    return create_model(
        "EstateFile", __base__=Section, __module__=__name__,
        estate=(Name, Field(description="the estate's name: first segment of every object-store key")),
        store=(StoreConfig, Field(default={"uri": DEFAULT_STORE_URI}, validate_default=True)),
        spark=(SparkConfig, Field(default={}, validate_default=True)),
        thresholds=(_thresholds(sections), Field(default={}, validate_default=True)),
        alerts=(Alerts, Field(default={}, validate_default=True)),
        repairs=(Repairs, Field(default={}, validate_default=True)),
        systems=(systems, Field(description="one list of clusters per system")),
    )


def _stamp_secret_refs(value: Any, where: str) -> None:
    """Each SecretRef of a freshly validated estate learns the field it came from (`where`, for errors)."""
    if isinstance(value, SecretRef):
        if not value.where:
            object.__setattr__(value, "where", where)
        return
    if isinstance(value, BaseModel) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        for name, info in fields_of(type(value)).items():
            _stamp_secret_refs(getattr(value, name), _join(where, info.alias or name))
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _stamp_secret_refs(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _stamp_secret_refs(item, _join(where, str(key)))


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


# -- YAML ------------------------------------------------------------------------------------------------------
class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last one."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem

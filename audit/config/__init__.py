"""Estate configuration: `load_estate(path)` -> validated frozen `Estate` (see docs/estate.md)."""
from audit.config.errors import EstateError
from audit.config.estate import estate_schema, load_estate, parse_estate
from audit.config.model import ClusterConfig, Estate, SecretRef
from audit.config.secrets import SecretError, SecretResolver

__all__ = ["EstateError", "load_estate", "parse_estate", "estate_schema", "Estate", "ClusterConfig", "SecretRef",
           "SecretError", "SecretResolver"]

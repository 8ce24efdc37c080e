"""Object storage for evidence and results: a local folder or any S3 API, one key layout."""
from audit.store.base import InvalidKey, ObjectNotFound, ObjectStore, StoreError
from audit.store.factory import open_estate_store, open_store

__all__ = ["ObjectStore", "StoreError", "ObjectNotFound", "InvalidKey", "open_store", "open_estate_store"]

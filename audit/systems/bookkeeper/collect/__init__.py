"""BookKeeper collection: ledger metadata from ZooKeeper, entry lists from bookies (protocol v3)."""

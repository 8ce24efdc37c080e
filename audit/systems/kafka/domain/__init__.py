"""Pure replication rules of the log-replicated system: leader epochs, follower truncation, per-partition verdicts
and MirrorMaker 2 offset translation (docs/formats/kafka.md)."""

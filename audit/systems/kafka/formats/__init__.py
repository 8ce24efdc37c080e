"""Kafka native formats: checkpoint files, meta.properties, partition.metadata, record batches and segments,
producer-state snapshots, KRaft metadata, dump-log and log-dirs output, MirrorMaker 2 records
(docs/formats/kafka.md)."""

"""Kafka collectors: the log-dir scanner, the admin collector, the MirrorMaker 2 reader, the import kinds."""

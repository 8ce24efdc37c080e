"""Spark transforms of the log-replicated system: normalize.py (raw/kafka/** -> the kafka_* tables of tables.py,
decoded file by file by decode.py) and audit.py (the tables -> findings and metrics). docs/kafka/contracts.md."""

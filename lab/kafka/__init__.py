"""The Kafka lab: a seeded simulation of replicated partitions (leaders, followers, high watermarks, leader epochs,
ISR, elections, restarts and power loss, retention) and of MirrorMaker 2, written to the real on-disk formats and
collected with the real scanner and admin collector (docs/kafka/lab.md)."""

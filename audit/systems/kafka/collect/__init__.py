"""Kafka collectors: the log-dir scanner (logdir.py), the admin collector (admin.py), the MirrorMaker 2 reader
(mm2.py), the cluster collector (collector.py) and the `replaudit import` kinds (imports.py)."""

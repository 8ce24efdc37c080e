"""Every run's numbers over time: what they are (metrics.py), where they are kept (store.py), and how tonight is
judged against them (drift.py)."""

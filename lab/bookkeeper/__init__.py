"""The BookKeeper lab cluster: a simulation that writes through ensembles, crashes bookies and emits the native
payloads (the `lab:` keys: config.py)."""
from lab.bookkeeper.cluster import BookKeeperLab, build_lab, emit, znode_path
from lab.bookkeeper.config import DEFAULT_FAULTS, FAULT_PARAMS, LabConfigError
from lab.bookkeeper.sim import LabError

__all__ = ["BookKeeperLab", "build_lab", "emit", "znode_path", "DEFAULT_FAULTS", "FAULT_PARAMS", "LabConfigError",
           "LabError"]

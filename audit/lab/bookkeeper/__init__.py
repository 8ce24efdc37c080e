"""The BookKeeper lab cluster (docs/bookkeeper/lab.md)."""
from audit.lab.bookkeeper.cluster import BookKeeperLab, build_lab, emit, znode_path
from audit.lab.bookkeeper.config import DEFAULT_FAULTS, FAULT_PARAMS, LabConfigError
from audit.lab.bookkeeper.sim import LabError

__all__ = ["BookKeeperLab", "build_lab", "emit", "znode_path", "DEFAULT_FAULTS", "FAULT_PARAMS", "LabConfigError",
           "LabError"]

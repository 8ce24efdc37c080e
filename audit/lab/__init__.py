"""The lab estate: simulated clusters that run their replication protocols, inject faults and emit the native
payloads real collectors fetch, plus the ground truth of what was broken."""
from audit.lab.bookkeeper import BookKeeperLab, build_lab, emit, znode_path
from audit.lab.bookkeeper_config import DEFAULT_FAULTS, FAULT_PARAMS, LabConfigError
from audit.lab.bookkeeper_sim import LabError

__all__ = ["BookKeeperLab", "build_lab", "emit", "znode_path", "DEFAULT_FAULTS", "FAULT_PARAMS", "LabConfigError",
           "LabError"]

"""The lab estate: simulated clusters that run their replication protocols, inject faults and emit the native
payloads real collectors fetch, plus the ground truth of what was broken."""

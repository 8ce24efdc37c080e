"""Native payload formats of the audited systems: decode, encode, redact, sniff. No network or store I/O."""

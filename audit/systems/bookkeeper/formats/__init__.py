"""BookKeeper native formats: ledger-metadata znodes, admin JSON, entry availability, bookie protocol v3."""

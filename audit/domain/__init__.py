"""Pure domain logic: positions, ranges, epochs, ensembles. No I/O anywhere below this package."""

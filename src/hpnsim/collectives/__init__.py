"""hpnsim.collectives."""

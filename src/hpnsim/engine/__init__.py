"""hpnsim.engine."""

"""hpnsim.routing."""

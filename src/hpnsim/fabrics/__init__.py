"""hpnsim.fabrics."""

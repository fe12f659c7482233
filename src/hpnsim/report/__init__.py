"""hpnsim.report."""

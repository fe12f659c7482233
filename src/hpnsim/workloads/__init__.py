"""hpnsim.workloads."""

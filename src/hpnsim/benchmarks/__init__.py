"""hpnsim.benchmarks."""

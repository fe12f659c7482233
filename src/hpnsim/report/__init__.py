"""hpnsim.report: figures (matplotlib, Agg backend) and tables for results."""

"""`compile-lens`: the command line (check, report, record, trial). Importing this package imports nothing else."""

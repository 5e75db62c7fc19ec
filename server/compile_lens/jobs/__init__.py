"""Work sent to the torch workers: the lanes of worker processes, one file's phases, the result cache."""

"""The deployment questions, asked with the benchmark (`questions`): does the target still export, which
ops Inductor does not generate code for, the compile report's data, and the batch sweep."""

"""PyTorch profiler (Kineto) traces: what a run's GPU did, per rank and step, on the user's lines.
Pure Python, no torch, no pygls: the CLI's `import`, the language server and the worker's live
measurement read traces with the same code. `stream` walks one trace file event by event in
bounded memory; `fold` keeps each event as a few numbers in typed arrays; `profile` turns that
into a rank's figures (busy/idle as HTA counts them, steps, launch-bound, CUDA graphs, top kernels
and the Python frames that launched them); `ranks` reads a file or a folder of per-rank files."""

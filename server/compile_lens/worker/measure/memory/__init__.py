"""Peak memory of one call, eager and compiled, counted where tensors are allocated (`peak`: CUDA's
allocator peak, or the profiler's memory events on CPU), not page-granular RSS."""

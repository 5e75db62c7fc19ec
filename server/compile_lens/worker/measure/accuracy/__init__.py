"""Eager vs compiled accuracy: `compare` (one forward's outputs and one backward's gradients, same
weights and seed, within each dtype's tolerance) and `drift` (where a difference beyond tolerance first
appears: the first module whose output drifts while its inputs still agree)."""

"""Measuring a target: eager vs compiled timing, memory, accuracy, cold compile, deployment."""

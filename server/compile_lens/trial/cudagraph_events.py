"""The trial's name for `torch_text.cudagraph_events` (the levers' CUDA-graphs lever reads the same
records in the worker, so the reader lives on the shared floor)."""

from ..torch_text.cudagraph_events import LOGGER, CudagraphEvents, event_of, watch

__all__ = ["LOGGER", "CudagraphEvents", "event_of", "watch"]

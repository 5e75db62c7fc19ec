"""Compile Lens: what torch.compile will do to your model, shown in the editor."""

__version__ = "0.1.0"

"""What a measurement calls and where: `model` (one side of the comparison: its forward under no_grad,
its training step, how `torch.compile` is called, the inputs and outputs), `devices` (which device,
moving inputs to it, out-of-memory failures) and `precision` (autocast around each call, TF32 flags,
restored after). Shared by the measuring worker, the cold child and the levers."""

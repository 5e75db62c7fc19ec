"""Reading what TorchDynamo does to a target: graph breaks, recompiles and the records of both."""

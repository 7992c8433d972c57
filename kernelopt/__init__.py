"""kernelopt: durable, dispatch-aware optimisation of the Triton kernels torch.compile generates."""

__version__ = "0.1.0"

"""gpuaas: a GPU-as-a-Service control plane that admits and preempts workloads as Kueue does."""

__version__ = "0.1.0"

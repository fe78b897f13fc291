"""podpin: exclusive, NUMA-aligned CPUs for Kubernetes pods with a pod-level shared pool for sidecars."""

__all__ = ["__version__"]

__version__ = "0.2.0"

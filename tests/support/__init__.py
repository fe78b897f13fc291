"""Shared test helpers: API server emulator, fixture tree builders, pod factories, machines, strategies, vectors,
Kubernetes tools (helm, kubectl) and the discovery server they talk to."""

"""The PodResources v1 wire messages: ``api.proto`` (podpin's own, minimal) and the modules generated from it.

Import ``api_pb2`` (protobuf only) explicitly; this package does not. No gRPC
stub module is generated: the client wires the three methods to its channel.
"""

__all__: list[str] = []

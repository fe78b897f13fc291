"""The PodResources v1 wire messages: ``api.proto`` (podpin's own, minimal) and the modules generated from it.

Import ``api_pb2`` (protobuf only) or ``api_pb2_grpc`` (loads gRPC) explicitly;
this package imports neither.
"""

__all__: list[str] = []

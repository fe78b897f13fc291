"""podpin's minimal CRI ``runtime.v1`` protobuf (``cri_api.proto``) and its generated Python (``cri_api_pb2``)."""

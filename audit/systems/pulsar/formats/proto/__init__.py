"""Generated protobuf modules (see regen.sh). Do not edit the *_pb2.py files by hand."""

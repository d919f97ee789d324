"""Generated from ../chat.proto by codegen.py."""

"""Websites that embed the chat widget, and their guest visitors (docs/widget.md)."""

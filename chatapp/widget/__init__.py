"""The widget's HTTP edge: its config for the host page, the panel page, guest tokens."""

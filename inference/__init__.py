"""Inference worker: hosts one engine and streams answers over the channel layer.

Never imports Django or `chatapp`: `inference.wire.protocol` is the only contract with the web side.
"""

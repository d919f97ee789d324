"""What the web processes and the inference workers share, and the only part of `inference`
the web's answer path imports (an import-linter contract in pyproject.toml holds it): the
messages between them (`protocol`), the request queue (`request_queue`, `stream_queue`), the
worker registry (`registry`), routing affinity (`affinity`), the Redis client and channel layer
(`redis_client`, `resilient_layer`, `transport`) and the one retry policy (`retry`). Nothing
here loads a model or an engine.
"""

"""Engines behind one narrow interface (`inference.engines.base.Engine`)."""

"""Materialise, test and export a vLLM fork kept as a patch series."""

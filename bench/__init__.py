"""Benchmarks of Slipway's partner API against a bare Falcon ASGI app: ``python -m bench me``."""

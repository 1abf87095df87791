"""The partner licensing API (``/v1``): its gate and handlers."""

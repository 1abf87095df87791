"""The ASGI entry point for any server: ``uvicorn app.asgi:app``."""
from app.factory import create_app

app = create_app()

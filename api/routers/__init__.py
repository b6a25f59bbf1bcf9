"""The API's routers, one module per area (FastAPI's "bigger applications" layout)."""

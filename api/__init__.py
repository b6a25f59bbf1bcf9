"""API layer: the FastAPI service for jobs, records, best-schedule queries and the dashboard.

The top layer: may import every other layer, through their top-level packages only.
"""

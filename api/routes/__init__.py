"""Routers of the ``/api/v1`` surface."""

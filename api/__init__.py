"""FastAPI service: campaigns, candidates, teams and keys, events, dashboard."""

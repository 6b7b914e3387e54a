"""Service tests: the API and Celery workers as real processes over Postgres and Redis."""

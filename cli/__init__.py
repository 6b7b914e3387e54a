"""The ``tuneforge`` command line."""

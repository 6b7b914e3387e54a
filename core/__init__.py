"""Code shared by every part of tuneforge: settings, ORM models, the feedback schema.

Imports none of ``api``, ``worker``, ``agent`` or ``cli`` (an import-linter contract checks it).
"""

"""Provisioning: uv virtualenvs per stack (:mod:`.venv`), loopback services (:mod:`.services`)."""

"""Provisioning: uv virtualenvs per stack (:mod:`.venv`), loopback services (:mod:`.services`),
a user's app made ready to run, its interface detected in its venv (:mod:`.user_app`)."""

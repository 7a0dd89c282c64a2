"""End to end on real processes (gunicorn, databases, Celery, browsers, the official SDK):
every test here starts one, so the folder marks them all ``server`` (tests/conftest.py)."""

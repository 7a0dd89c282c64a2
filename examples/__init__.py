"""Runnable example agents: ``gunicorn -k gevent examples.echo_agent:app``."""

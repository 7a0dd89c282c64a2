"""Compatibility path from 0.1: the authentication hook lives in :mod:`a2a_flask.web.auth`."""
from .web.auth import *  # noqa: F401,F403

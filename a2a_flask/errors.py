"""Compatibility path from 0.1: the A2A errors live in :mod:`a2a_flask.protocol.errors`."""
from .protocol.errors import *  # noqa: F401,F403

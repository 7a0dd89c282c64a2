"""Compatibility path from 0.1: signed pushes live in :mod:`a2a_flask.signing.pushes`."""
from ..signing.pushes import *  # noqa: F401,F403

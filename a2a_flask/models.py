"""Compatibility path from 0.1: the 1.0 models live in :mod:`a2a_flask.protocol.models`."""
from .protocol.models import *  # noqa: F401,F403

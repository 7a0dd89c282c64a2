"""Compatibility path from 0.1: signed cards live in :mod:`a2a_flask.signing.cards`."""
from .signing.cards import *  # noqa: F401,F403

"""``python -m a2a_flask``: the ``a2a-flask`` command line (see :mod:`a2a_flask.client.cli`)."""
import sys

from .client.cli import main

if __name__ == "__main__":
    sys.exit(main())

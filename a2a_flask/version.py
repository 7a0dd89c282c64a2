"""The distribution: its version, and how to install one of its extras (a module of
its own, so that any layer may read it)."""

__version__ = "0.2.0"


def install_extra(extra: str) -> str:
    """How to install the optional ``extra`` (``redis``, ``sql``...), for an error
    message: from a package index, or from a checkout of the repository, since a
    checkout is how many install a release that is not on the index yet."""
    return (f"pip install 'a2a-flask[{extra}]' (from a checkout: "
            f"pip install -e '.[{extra}]')")

"""Names that moved: a module ``__getattr__`` still serves them, with a warning.

A module keeps a deprecated name working by asking a :class:`Moved` for it from
its own ``__getattr__`` (PEP 562), which runs only for names the module does not
define, so the warning points at the caller's line and nothing else pays.
"""
from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any, Dict, Iterable, Mapping, Tuple


class Moved:
    """The deprecated names of ``module``: each the object it stands for, and where
    that now lives (``"a2a_flask.errors.A2AException"``), for the warning."""

    def __init__(self, module: str, names: Mapping[str, Tuple[Any, str]]) -> None:
        self.module = module
        self.names: Dict[str, Tuple[Any, str]] = dict(names)

    @classmethod
    def to(cls, module: str, home: ModuleType, names: Iterable[str]) -> "Moved":
        """``names`` of ``module`` that now live under the same names in ``home``."""
        return cls(module, {name: (getattr(home, name), f"{home.__name__}.{name}")
                            for name in names})

    def get(self, name: str) -> Any:
        """The object ``name`` stands for, with a :class:`DeprecationWarning` naming
        its new place; :class:`AttributeError` for a name that is not one of them."""
        try:
            found, place = self.names[name]
        except KeyError:
            raise AttributeError(f"module {self.module!r} has no attribute {name!r}") from None
        # stacklevel 3: past this method and the module's __getattr__, to the caller.
        warnings.warn(f"{self.module}.{name} is deprecated; use {place}", DeprecationWarning,
                      stacklevel=3)
        return found

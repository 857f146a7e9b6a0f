"""Run a function right after a module is first imported (for registrations into heavy torch modules
that :func:`torch_mspti.sim.enable` must not import itself). Thread-safety: as Python's import system."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable

__all__ = ["call_after_import"]


class _Hook(importlib.abc.MetaPathFinder):
    """Finds ``name`` with the other finders and calls ``fn()`` once its module has executed."""

    def __init__(self, name: str, fn: Callable[[], None]):
        self.name, self.fn = name, fn

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        inner, fn = spec.loader, self.fn

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return inner.create_module(spec)

            def exec_module(self, module):
                inner.exec_module(module)
                fn()

        spec.loader = _Loader()
        return spec


def call_after_import(name: str, fn: Callable[[], None]) -> None:
    """``fn()`` now when module ``name`` is already imported, else right after its first import
    (once; exceptions of ``fn`` propagate out of that import)."""
    if name in sys.modules:
        fn()
    elif not any(isinstance(f, _Hook) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook(name, fn))

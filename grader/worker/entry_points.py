"""The harness functions `impl.run` may run next to the student's code, and only those.

`impl.run(fn, ...)` names `fn` by its module and name, and the worker looks the name up. Student code
shares that process: by the time a request arrives it may have rebound a module's attribute, or
swapped a function's code, so that the lookup finds a function that reports whatever the check
wants. So the worker resolves every request against the functions these modules held when it
started, before any student code ran, and refuses one whose code changed since; the checker refuses,
before sending, any function outside these modules. The test suites' own modules are not among them:
they are not even on the worker's import path.

This stops replacing a scenario, not patching what a scenario calls (torch, a helper): the checks
that decide points verify what comes back in the checker (SECURITY.md, "Worker claims").
"""

from __future__ import annotations

import importlib
import sys
import types

MODULES = (
    "grader.memory_safety",               # the heap probe between tests
    "grader.perf.in_worker",
    "grader.references.attention",
    "grader.references.mixed_precision",
    "grader.scenarios.flash_attention",   # checker-only scenarios: absent from the handout
    "grader.scenarios.mixed_precision",
)


class NotAnEntryPoint(TypeError):
    """A request for a function the worker may not run, or one changed since the worker started."""


def is_entry_point(fn) -> bool:
    """Checker side: `fn` is a function of MODULES, the very object its module holds under its name."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    return (module is not None and module.__name__ in MODULES and isinstance(fn, types.FunctionType)
            and getattr(module, fn.__qualname__, None) is fn)


class EntryPoints:
    """Worker side: the functions of MODULES, with their code, recorded before student code runs."""

    def __init__(self, modules=MODULES):
        self._functions: dict[tuple[str, str], tuple[types.FunctionType, types.CodeType]] = {}
        for name in modules:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue          # the handout ships no checker-only scenarios
            for attribute, value in vars(module).items():
                if isinstance(value, types.FunctionType) and value.__module__ == name:
                    self._functions[(name, attribute)] = (value, value.__code__)

    def resolve(self, fn) -> types.FunctionType:
        """The recorded function `fn` names, whatever object the request's lookup produced."""
        key = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None))
        recorded = self._functions.get(key)
        if recorded is None:
            raise NotAnEntryPoint(f"{key[0]}.{key[1]} is not a harness function the worker may run")
        function, code = recorded
        if function.__code__ is not code:
            raise NotAnEntryPoint(f"{key[0]}.{key[1]} was changed after the worker started")
        return function

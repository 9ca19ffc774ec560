"""One call of student code under the guards a check asked for: the forbidden ops refused (and
recorded even if the code swallows the refusal), Triton launches counted, CUDA synchronised so a
kernel's fault is this call's error. Both modes use it: the worker for graded runs, the test process
for a student's local run (grader.impl.InProcessImpl)."""

from __future__ import annotations

import sys


def execute(modules, kind, target, args, kwargs, rules, entry_points=None):
    """(result, claims) of `kind` "call" (target = (module, function)) or "run" (target(modules, ...)).

    `entry_points` (grader.worker.entry_points.EntryPoints, in the worker) resolves a "run" target to the
    function recorded before student code ran."""
    from grader.guards import count_triton_launches, forbid_ops, runtime_forbidden, wrapper_ops_only

    __tracebackhide__ = True  # noqa: F841 - in-process runs: pytest shows the student's frames only
    forbid, require_triton = rules
    names = runtime_forbidden(forbid, require_triton)
    result = None
    with count_triton_launches() as launches, \
            (wrapper_ops_only(names) if require_triton and forbid else forbid_ops(names)) as hits:
        try:
            if kind == "call":
                module_name, function_name = target
                result = getattr(modules.load(module_name), function_name)(*args, **kwargs)
            elif kind == "run":
                function = entry_points.resolve(target) if entry_points is not None else target
                result = function(modules, *args, **kwargs)
            else:
                raise ValueError(f"unknown request kind {kind!r}")
            synchronize()  # a kernel's fault (illegal address) surfaces here, as this call's error
        except BaseException:
            if not hits:
                raise
            # The forbidden op is the verdict, whatever the code did after the guard refused it.
    return result, {"launches": launches.count, "forbidden": list(hits)}


def synchronize() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()

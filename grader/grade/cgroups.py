"""One cgroup per checking run: a memory bound that counts every page the run holds, and a bound on
its processes.

The worker's RLIMIT_DATA counts private memory only: shared anonymous mappings and memfd pages (held
by a descriptor, never mapped) escape it, and a memfd is no file of the sandbox's bounded tmpfs. A
memory cgroup charges all of them, the tmpfs files the run writes included, to the run, and kills
the run when it goes over. RLIMIT_NPROC does not hold for a sandbox uid mapped to root (the kernel
exempts root's processes), so as root only a pids cgroup bounds a fork bomb while the run lives (a
grader that is not root gets RLIMIT_NPROC per run too: grader.grade.checking_run.LIMIT_TASKS).

The runner makes the cgroup below its own, sets the limits, starts the run through `join_prefix`
(a shell that moves itself in, then execs the launch: everything the run starts is inside from its
first instruction), and removes it after. Per controller, cgroup v2 is used where the runner's own
cgroup may hold children with it enabled, else the v1 hierarchy of that controller. v2 kills the
whole run on an OOM (memory.oom.group); v1 kills one process, so `watch` ends the rest.
Where neither can be made, `Places` says so and grading keeps RLIMIT_DATA alone (`grader doctor`).
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import signal
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CONTROLLERS = ("memory", "pids")
PREFIX = "grader-run-"
PROC_SELF = "/proc/self"


@dataclass(frozen=True)
class Place:
    """Where run cgroups of one controller are made: below `parent`, in cgroup `version` 1 or 2."""

    controller: str
    version: int
    parent: Path

    @property
    def label(self) -> str:
        return f"cgroup v{self.version}"


@dataclass(frozen=True)
class Places:
    """The place of each controller that works here, and why the others do not."""

    memory: Place | None
    pids: Place | None
    why_not: dict

    def directories(self, name: str) -> list[Path]:
        return list(dict.fromkeys(place.parent / name for place in (self.memory, self.pids) if place))


def read_mounts(proc: str = PROC_SELF) -> list[tuple[str, str, str, set[str]]]:
    """(mount root, mount point, fstype, super options) of each cgroup mount, from mountinfo."""
    found = []
    try:
        lines = Path(proc, "mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[3], fields[4].replace("\\040", " "), tail[0], set(tail[2].split(","))))
    return found


def own_paths(proc: str = PROC_SELF) -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    paths = {}
    try:
        lines = Path(proc, "cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in (parts[1].split(",") if parts[1] else [""]):
                paths[controller] = parts[2]
    return paths


def _joined(mount_root: str, mount_point: str, path: str) -> Path | None:
    """The folder of cgroup `path` under a mount of the hierarchy's `mount_root`."""
    relative = os.path.relpath(path, mount_root) if mount_root != "/" else path.lstrip("/")
    if relative.startswith(".."):
        return None
    folder = Path(mount_point) / relative if relative not in ("", ".") else Path(mount_point)
    return folder if folder.is_dir() else None


def candidates(proc: str = PROC_SELF) -> dict[str, list[Place]]:
    """Per controller, the places to try, v2 first: the runner's own cgroup in each hierarchy."""
    own, found = own_paths(proc), {controller: [] for controller in CONTROLLERS}
    for root, point, fstype, options in read_mounts(proc):
        for controller in CONTROLLERS:
            if fstype == "cgroup2" and "" in own:
                folder = _joined(root, point, own[""])
                if folder and controller in _words(folder / "cgroup.controllers"):
                    found[controller].insert(0, Place(controller, 2, folder))
            elif fstype == "cgroup" and controller in options and controller in own:
                folder = _joined(root, point, own[controller])
                if folder:
                    found[controller].append(Place(controller, 1, folder))
    return found


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def usable(place: Place) -> str:
    """'' when a run cgroup can be made at `place` with its limit set; else why not. On v2 the
    controller is enabled for the parent's children first (refused while the parent holds processes
    and is not the root: the kernel's no-internal-processes rule)."""
    try:
        if place.version == 2 and place.controller not in _words(place.parent / "cgroup.subtree_control"):
            _enable(place)
        probe = place.parent / f"{PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        probe.mkdir()
        try:
            limit = {"memory": "memory.max" if place.version == 2 else "memory.limit_in_bytes",
                     "pids": "pids.max"}[place.controller]
            (probe / limit).write_text(str(64 << 20) if place.controller == "memory" else "64")
        finally:
            probe.rmdir()
    except OSError as error:
        return f"{place.label} at {place.parent}: {error.strerror or error}"
    return ""


def _enable(place: Place) -> None:
    """Enable a v2 controller for the children of the runner's own cgroup. The kernel refuses while
    that cgroup holds processes (EBUSY). When the runner is its only process, as in a delegated
    `systemd-run --scope -p Delegate=yes`, it moves itself into a leaf child first, as systemd's
    delegation rules ask of a delegated process; anyone else's processes are never moved."""
    control = place.parent / "cgroup.subtree_control"
    try:
        control.write_text(f"+{place.controller}")
        return
    except OSError as error:
        if error.errno != errno.EBUSY or _members(place.parent) != [os.getpid()]:
            raise
    leaf = place.parent / f"{PREFIX}runner"
    leaf.mkdir(exist_ok=True)
    (leaf / "cgroup.procs").write_text(str(os.getpid()))
    control.write_text(f"+{place.controller}")


@lru_cache(maxsize=None)
def places(proc: str = PROC_SELF) -> Places:
    """What this machine offers, probed once per process: the first usable place per controller."""
    chosen, why_not = {}, {}
    for controller, options in candidates(proc).items():
        reasons = []
        for place in options:
            reason = usable(place)
            if not reason:
                chosen[controller] = place
                break
            reasons.append(reason)
        if controller not in chosen:
            why_not[controller] = "; ".join(reasons) or "no cgroup hierarchy with this controller is mounted"
    return Places(chosen.get("memory"), chosen.get("pids"), why_not)


class RunCgroup:
    """The cgroup(s) of one checking run: made by `create`, joined through `join_prefix`, watched for
    an OOM kill, emptied and removed by `remove`."""

    def __init__(self, where: Places, memory_bytes: int | None, pids_max: int | None, label: str = ""):
        self.where, self.memory_bytes, self.pids_max = where, memory_bytes, pids_max
        # a plain folder name, whatever the submission's folder is called
        plain = re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:40].lstrip(".") or "run"
        self.name = PREFIX + plain + f"-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.folders = where.directories(self.name)

    @property
    def memory(self) -> Path | None:
        return self.where.memory.parent / self.name if self.where.memory else None

    @property
    def pids(self) -> Path | None:
        return self.where.pids.parent / self.name if self.where.pids else None

    def create(self) -> None:
        for folder in self.folders:
            folder.mkdir()
        if self.memory is not None and self.memory_bytes:
            self._limit_memory(self.where.memory.version, self.memory, str(self.memory_bytes))
        if self.pids is not None and self.pids_max:
            (self.pids / "pids.max").write_text(str(self.pids_max))

    @staticmethod
    def _limit_memory(version: int, folder: Path, value: str) -> None:
        """The bound, and no swap to spill past it. v2 kills the run's every process on an OOM."""
        if version == 2:
            (folder / "memory.max").write_text(value)
            optional = (("memory.swap.max", "0"), ("memory.oom.group", "1"))
        else:
            (folder / "memory.limit_in_bytes").write_text(value)
            optional = (("memory.memsw.limit_in_bytes", value),)   # only with swap accounting on
        for name, setting in optional:
            try:
                (folder / name).write_text(setting)
            except OSError:
                pass            # a kernel without it: v1's watch ends the run itself, no swap to spill to

    def join_prefix(self) -> list[str]:
        """A command prefix: /bin/sh writes its pid into each cgroup, then execs the launch."""
        writes = " && ".join(f"echo $$ > {shlex.quote(str(folder / 'cgroup.procs'))}" for folder in self.folders)
        return ["/bin/sh", "-c", f'{writes} && exec "$@"', "grader-run-cgroup"]

    def oom_killed(self) -> bool:
        """True once the kernel killed a process of the run for going over the memory bound."""
        if self.memory is None:
            return False
        if self.where.memory.version == 2:
            counts = _counts(self.memory / "memory.events")
            return counts.get("oom_kill", 0) > 0 or counts.get("oom_group_kill", 0) > 0
        return _counts(self.memory / "memory.oom_control").get("oom_kill", 0) > 0

    def forks_refused(self) -> int:
        return _counts(self.pids / "pids.events").get("max", 0) if self.pids is not None else 0

    def peaks(self) -> dict[str, int]:
        """The run's highest memory (bytes) and task count, where the kernel keeps them."""
        found = {}
        if self.memory is not None:
            name = "memory.peak" if self.where.memory.version == 2 else "memory.max_usage_in_bytes"
            found["memory"] = _number(self.memory / name)
        if self.pids is not None:
            found["tasks"] = _number(self.pids / "pids.peak")
        return {key: value for key, value in found.items() if value is not None}

    def kill(self) -> None:
        """SIGKILL every process of the run, until none is left (v2's cgroup.kill where the kernel has it)."""
        for folder in self.folders:
            if (folder / "cgroup.kill").exists():
                try:
                    (folder / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            for _ in range(50):
                pids = _members(folder)
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.1)

    def remove(self) -> None:
        """End what is left and remove the cgroups (an exiting process may hold one a moment)."""
        self.kill()
        for folder in self.folders:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def _members(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _counts(path: Path) -> dict[str, int]:
    """Lines "key value" (memory.events, memory.oom_control, pids.events) as numbers."""
    counts = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return counts
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


def _number(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def for_run(where: Places, memory_bytes: int | None, pids_max: int | None, label: str,
            say=lambda text: None) -> RunCgroup | None:
    """A created cgroup for one checking run, or None where none can be made here (what holds then
    is `describe`'s fallback); a failure to make one is said, and the run goes on without."""
    if where.memory is None and where.pids is None:
        return None
    run = RunCgroup(where, memory_bytes, pids_max, label)
    try:
        run.create()
    except OSError as error:
        say(f"could not make the checking run's cgroup ({error}): it runs with RLIMIT_DATA alone")
        run.remove()
        return None
    return run


def describe(where: Places, memory_bytes_text: str, pids_max: int,
             nproc_holds: bool = False) -> dict[str, tuple[str, str]]:
    """What bounds a checking run's memory and processes here: {what: (detail, fix or '')}.
    `nproc_holds`: runs are sandboxed by a grader that is not root, so the RLIMIT_NPROC the checker
    sets counts the run's own tasks (its user namespace's)."""
    fix = ("give the grader a cgroup it may write, with the controller: `systemd-run --scope -p Delegate=yes "
           "grader grade ...` (add --user as an unprivileged grading user), a container whose cgroup "
           "(v2) is writable and holds the grader alone, or, as root, a cgroup v1 hierarchy of it")
    found, why = {}, {key: f" ({text})" for key, text in where.why_not.items() if text}
    if where.memory is not None:
        setting = "memory.max" if where.memory.version == 2 else "memory.limit_in_bytes"
        how = "memory.oom.group" if where.memory.version == 2 else "the runner, on the kernel's first OOM kill"
        found["memory"] = (f"{where.memory.label} {setting} per checking run ({memory_bytes_text}): private, "
                           f"shared and memfd pages and tmpfs files; over it the whole run is killed ({how})", "")
    else:
        found["memory"] = ("RLIMIT_DATA only (the worker's private memory); shared anonymous and memfd pages "
                           f"are unbounded{why.get('memory', '')}", fix)
    if where.pids is not None:
        found["processes"] = (f"{where.pids.label} pids.max {pids_max} per checking run", "")
    elif nproc_holds:
        found["processes"] = (f"RLIMIT_NPROC {pids_max} per checking run (its sandbox's user namespace counts "
                              f"the run's tasks alone){why.get('pids', '')}", "")
    else:
        found["processes"] = ("unbounded while a run lives (RLIMIT_NPROC holds only in the sandbox of a grader "
                              "that is not root: the kernel exempts root's processes, which the sandbox uid maps "
                              "to); its pid namespace ends them with the run"
                              f"{why.get('pids', '')}", fix)
    return found

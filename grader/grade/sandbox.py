"""How one submission's checking process is launched: argv, environment and working folder.

Pure but for reading the interpreter's own layout (sys.prefix, sys.path, .pth and editable finders):
nothing here starts a process, so every combination (bubblewrap or not, GPUs or not) is a unit test.
The runner owns the process itself (process group, wall-clock kill, reading results).

With bubblewrap (`bwrap`, from the OS packages) the child starts from an empty root and sees only an
allow-list, read-only: the OS's programs and libraries (/usr and its merged-usr links), the few /etc
files the loader and libc read, the interpreter wherever it lives (venv, conda, pyenv, system; see
`python_paths`), the checker tree and its own scratch. It runs as an unprivileged uid in its own user
namespace, with no network, its own pid/ipc namespaces, no capabilities, a minimal /dev plus the NVIDIA
device nodes. Its writable places are size-bounded tmpfs (its home, caches, TMPDIR, /tmp, /dev/shm):
filling one fails that student's code with ENOSPC and nobody else's. Staff folders that an allowed
path happens to contain (the repo around a `.venv`, say) are covered by empty folders. The checker
tree's hidden tests are covered by a disposable copy from that scratch, which the checker empties once
it has collected them (grader.disposable). Besides that copy, the one host folder a run may write is
a split submission's Triton cache, that submission's own, which its parts share (`build_launch`).
Without bubblewrap the child still gets a scrubbed environment and its own scratch.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grader import disposable

# Parent variables the child may inherit: what Python, CUDA and locales need, nothing that configures
# pytest, the grader or the user's tools.
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME",
                 "CUDA_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "TRITON_PTXAS_PATH", "GRADER_CALL_TIMEOUT",
                 "GRADER_PERF_WARMUP")
NAMESPACES = ("--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts")
SANDBOX_UID = SANDBOX_GID = 65534          # "nobody": root of the grading host is not root in here
# The OS part of the allow-list: programs, libraries (also the merged-usr links /lib, /bin...), and
# the /etc files the dynamic loader, libc and Python's locale/pwd lookups read. Not /etc/shadow, not
# /home, /root, /var, /opt, /srv or /mnt: what is not listed does not exist inside.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
                "/etc/os-release")
# CPU topology for torch's cpuinfo; with GPUs, /sys entire (the driver and NVML walk the PCI tree).
SYS_PATHS_CPU = ("/sys/devices/system/cpu", "/sys/devices/system/node")
SYS_PATHS_GPU = ("/sys",)
# Sizes of the writable tmpfs: big enough for Triton's kernel cache and CPU tensors shared with the
# worker, small enough that a full one costs the host little memory.
TMPFS_MIB = {"/tmp": 512, "/dev/shm": 512}
SCRATCH_TMPFS_MIB = 512                    # each of the child's home, TMPDIR and cache folders
# This project's own editable install points into the staff checkout; the child imports the grader
# from the checker tree (PYTHONPATH), so that root is never bound.
OWN_DISTRIBUTION = "gpu_systems_assignment"
# Host folders a submission has no business reading. With the allow-list they are absent anyway;
# kept as masks for when an allowed path (a Python prefix) contains one of them.
HOST_MASKS = ("/root", "/home", "/run", "/var/run", "/var/tmp", "/srv", "/mnt", "/media")


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    sandboxed: bool

    @property
    def summary(self) -> str:
        if self.sandboxed:
            return "bubblewrap (unprivileged, no network, allow-listed read-only system, bounded scratch)"
        return "none (--no-sandbox or bubblewrap not installed)"


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


@lru_cache(maxsize=None)
def bwrap_features(bwrap: str) -> frozenset[str]:
    """Options of this bubblewrap that the launch uses when present: `--size` (0.5+) bounds a tmpfs,
    `--disable-userns` (0.8+) stops the child nesting a user namespace of its own."""
    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(flag for flag in ("--size", "--disable-userns") if flag in text)


def probe_argv(bwrap: str) -> list[str]:
    """A sandbox that starts this interpreter: if this fails, bubblewrap cannot work on this machine.
    (The batch's preflight, grader.grade.preflight, goes further: grader and torch, as grading runs.)"""
    return bwrap_argv([sys.executable, "-c", "pass"], bwrap=bwrap, scratch=None,
                      cwd=Path("/"), readonly=[], masked=[], device_nodes=[], keep_visible=python_paths(),
                      features=bwrap_features(bwrap))


def python_paths(environ=None, exclude=()) -> list[Path]:
    """Everything this interpreter needs to start and import what it has installed: its prefixes, the
    executable and its symlink chain, every entry of the sys.path it builds by itself, the folders
    .pth files and editable-install finders point at, and the CUDA/LD_LIBRARY_PATH folders the child
    inherits. Entries that come only
    from this process's PYTHONPATH (the child gets its own) or lie in `exclude` are left out."""
    environ = os.environ if environ is None else environ
    own = {os.path.realpath(p) for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             *executable_chain(sys.executable)]
    entries = interpreter_sys_path()
    found += entries
    for entry in entries:
        found += editable_roots(entry)
    for key in ("CUDA_HOME", "CUDA_PATH", "TRITON_PTXAS_PATH"):
        if environ.get(key):
            found.append(environ[key])
    found += [p for p in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    keep, seen = [], set()
    for path in found:
        if not os.path.isabs(path) or not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        if real in own or any(_inside(Path(real), Path(e)) for e in exclude):
            continue
        for candidate in dict.fromkeys((os.path.normpath(path), real)):
            if candidate not in seen:
                seen.add(candidate)
                keep.append(Path(candidate))
    return keep


@lru_cache(maxsize=None)
def interpreter_sys_path(python: str = sys.executable) -> tuple[str, ...]:
    """sys.path as the interpreter builds it by itself (-I: no PYTHONPATH, no script folder, no cwd,
    no user site): what the child needs besides the checker tree. This process's own sys.path would
    also hold its script's folder or cwd (`python -m grader` run from /tmp or $HOME would bind it)."""
    code = "import json, sys; print(json.dumps([p for p in sys.path if p]))"
    try:
        done = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=60)
        found = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        found = sys.path[1:]
    return tuple(entry for entry in found if isinstance(entry, str) and os.path.isabs(entry))


def executable_chain(executable: str) -> list[str]:
    """The executable, each symlink it goes through and the file it ends at (venv/bin/python ->
    python3 -> /usr/bin/python3.11): the child must find every step."""
    chain, path = [], os.path.abspath(executable)
    for _ in range(40):
        chain.append(path)
        if not os.path.islink(path):
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
    return chain + [os.path.realpath(executable)]


def editable_roots(folder: str) -> list[str]:
    """Source folders of editable installs in a site-packages `folder`: lines of .pth files that name
    folders, and the MAPPING of setuptools' `__editable__.*_finder.py` modules."""
    roots = []
    for pth in _not_own(glob.glob(os.path.join(folder, "*.pth"))):
        try:
            lines = Path(pth).read_text(errors="replace").splitlines()
        except OSError:
            continue
        roots += [line.strip() for line in lines if line.strip() and not line.startswith(("#", "import"))]
    for finder in _not_own(glob.glob(os.path.join(folder, "__editable__*finder.py"))):
        try:
            tree = ast.parse(Path(finder).read_text(errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            target = node.target if isinstance(node, ast.AnnAssign) else \
                (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
            if isinstance(target, ast.Name) and target.id == "MAPPING" and node.value is not None:
                try:
                    roots += [str(value) for value in ast.literal_eval(node.value).values()]
                except (ValueError, AttributeError):
                    pass
    return [root for root in roots if os.path.isabs(root)]


def _not_own(files: list[str]) -> list[str]:
    return [name for name in files if OWN_DISTRIBUTION not in os.path.basename(name).replace("-", "_")]


def gpu_device_nodes(dev: str = "/dev") -> list[str]:
    """NVIDIA device nodes to pass through: /dev/nvidia0.., nvidiactl, nvidia-uvm*, nvidia-caps/*."""
    nodes = glob.glob(os.path.join(dev, "nvidia*")) + glob.glob(os.path.join(dev, "nvidia-caps", "*"))
    return sorted(node for node in nodes if not os.path.isdir(node))


def child_env(base_env: dict[str, str], *, scratch: Path, pythonpath: Path,
              gpus: list[str] | None, extra: dict[str, str] | None = None,
              triton_cache: Path | None = None) -> dict[str, str]:
    """A scrubbed environment: caches, HOME and TMPDIR inside scratch, only the plugin given by -p,
    and CUDA_VISIBLE_DEVICES pinned (empty hides every GPU; None leaves the machine's default).
    `triton_cache`: Triton's cache there instead, a folder the submission's parts share."""
    scratch = Path(scratch)
    env = {key: base_env[key] for key in INHERITED_ENV if key in base_env}
    env.update({
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "TRITON_CACHE_DIR": str(triton_cache if triton_cache is not None else scratch / "triton-cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor-cache"),
        "XDG_CACHE_HOME": str(scratch / "cache"),
        "MPLCONFIGDIR": str(scratch / "cache"),
        "PYTHONPATH": str(pythonpath),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    })
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    env.update(extra or {})
    return env


def scratch_folders(scratch: Path) -> list[Path]:
    """Folders the runner creates before launch (the child's env points into them)."""
    return [Path(scratch) / name for name in ("home", "tmp", "triton-cache", "inductor-cache", "cache")]


def bwrap_argv(command: list[str], *, bwrap: str, scratch: Path | None, cwd: Path, readonly: list[Path],
               masked: list[Path], device_nodes: list[str], keep_visible: list[Path] = (),
               covers: list[tuple[Path, Path]] = (), features: frozenset[str] = frozenset(("--size",)),
               system: tuple[str, ...] = SYSTEM_PATHS, shared: list[Path] = ()) -> list[str]:
    """bubblewrap around `command`, from an empty root. Mount order matters: later mounts cover
    earlier ones. First /dev, /proc and the bounded /tmp and /dev/shm, then the allow-list, read-only:
    `system` (symlinks recreated as symlinks) and `keep_visible` (the interpreter, from
    `python_paths`), parents before children; then empty folders
    over the `masked` ones that an allowed path contains, then the allowed paths inside those masks
    again (a .venv inside the staff repo), then the checker tree (`readonly`), the scratch (read-only)
    with size-bounded tmpfs over its writable folders, then each `shared` folder writable at its own
    path (the submission's Triton cache, which its parts share), and last each (source, target) of
    `covers`: a writable `source` over `target` in the read-only tree."""
    argv = [bwrap, "--die-with-parent", "--new-session", *NAMESPACES, "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_GID)]
    if "--disable-userns" in features:
        argv.append("--disable-userns")
    argv += ["--cap-drop", "ALL"]
    system_paths = [*system, *(SYS_PATHS_GPU if device_nodes else SYS_PATHS_CPU)]
    wanted = {Path(p) for p in system_paths if os.path.lexists(p)} | {Path(p) for p in keep_visible}
    allowed = _outermost(wanted)
    argv += ["--dev", "/dev"]
    for node in device_nodes:
        argv += ["--dev-bind", node, node]
    argv += ["--proc", "/proc"]
    for target, mib in TMPFS_MIB.items():       # before the binds: a venv under /tmp shows through
        argv += _tmpfs(target, mib, features)
    for path in allowed:
        argv += _expose(path)
    masks = [Path(m) for m in masked if any(_inside(m, path) for path in allowed)]
    for mask in masks:
        argv += ["--tmpfs", str(mask)]
    for path in _outermost({path for path in wanted if any(_inside(path, mask) for mask in masks)}):
        argv += _expose(path)
    for path in readonly:
        argv += ["--ro-bind", str(path), str(path)]
    if scratch is not None:
        argv += ["--ro-bind", str(scratch), str(scratch)]
        for folder in scratch_folders(scratch):
            argv += _tmpfs(str(folder), SCRATCH_TMPFS_MIB, features)
    for folder in shared:
        argv += ["--bind", str(folder), str(folder)]
    for source, target in covers:
        argv += ["--bind", str(source), str(target)]
    argv += ["--chdir", str(cwd), "--", *command]
    return argv


def _outermost(paths: set[Path]) -> list[Path]:
    """Parents before children, and no path that a bound folder (not a symlink) already shows."""
    ordered = sorted(paths, key=lambda path: (len(path.parts), str(path)))
    folders = [p for p in ordered if not p.is_symlink()]
    return [p for p in ordered if not any(f != p and f in p.parents for f in folders)]


def _expose(path: Path) -> list[str]:
    """A symlink is recreated (so /lib -> usr/lib stays a link), anything else is bound read-only."""
    if path.is_symlink():
        return ["--symlink", os.readlink(path), str(path)]
    return ["--ro-bind", str(path), str(path)]


def _tmpfs(target: str, mib: int, features: frozenset[str]) -> list[str]:
    size = ["--size", str(mib << 20)] if "--size" in features else []
    return [*size, "--tmpfs", target]


def build_launch(command: list[str], *, scratch: Path, checker_root: Path, gpus: list[str] | None,
                 sandbox: bool, bwrap: str | None, base_env: dict[str, str], masked: list[Path] = (),
                 device_nodes: list[str] = (), keep_visible: list[Path] = (),
                 extra_env: dict[str, str] | None = None,
                 disposable_copy: tuple[Path, Path] | None = None,
                 features: frozenset[str] | None = None, triton_cache: Path | None = None) -> Launch:
    """The launch for one submission: `command` runs in `checker_root` (the pristine copy of the
    grader and test suites), inside bubblewrap when `sandbox` and `bwrap` are both given, seeing the
    interpreter's `keep_visible` paths (`python_paths()`) read-only.
    `disposable_copy` = (copy, folder of the checker tree): inside bubblewrap the copy (grader.disposable)
    covers that folder and the checker empties it after collection; without bubblewrap nothing hides
    files from student code, so it is not used.
    `triton_cache`: a folder the runner made for this one submission, outside every run's scratch, that
    all of its checking runs (its parts) use as Triton's cache, bound writable into each of their
    sandboxes and into no other submission's: a kernel one part compiled, the others load. Sharing it
    gives a part nothing new, since every part runs the same student's code. Without it, each run's
    cache is a tmpfs in its own scratch."""
    sandboxed = bool(sandbox and bwrap)
    covers = [disposable_copy] if sandboxed and disposable_copy is not None else []
    if covers:
        extra_env = {**(extra_env or {}), disposable.ENV: str(disposable_copy[1])}
    env = child_env(base_env, scratch=scratch, pythonpath=checker_root, gpus=gpus, extra=extra_env,
                    triton_cache=triton_cache)
    if sandboxed:
        argv = bwrap_argv(command, bwrap=bwrap, scratch=scratch, cwd=checker_root,
                          readonly=[checker_root], masked=list(masked),
                          device_nodes=list(device_nodes), keep_visible=list(keep_visible), covers=covers,
                          features=bwrap_features(bwrap) if features is None else features,
                          shared=[triton_cache] if triton_cache is not None else [])
        return Launch(argv, env, str(checker_root), True)
    return Launch(list(command), env, str(checker_root), False)


def _inside(path: Path, folder: Path) -> bool:
    """True when `path` is `folder` or below it."""
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False

"""How one submission's checking process is launched: argv, environment and working folder.

Pure: nothing here starts a process, so every combination (bubblewrap or not, GPUs or not) is a unit
test. The runner owns the process itself (process group, wall-clock kill, reading results).

With bubblewrap (`bwrap`, from the OS packages) the child sees the system read-only, no network, its
own pid/ipc namespaces, no capabilities (even when the grader runs as root), a minimal /dev plus the NVIDIA device nodes, empty folders over the staff paths
it must not read (solutions, hidden tests in the repo, other students, .git), and exactly one writable
folder: its own scratch. The checker tree's hidden tests are covered by a disposable copy from that
scratch, which the checker empties once it has collected them (grader.disposable). Without it, the
child still gets a scrubbed environment and its own scratch.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from grader import disposable

# Parent variables the child may inherit: what Python, CUDA and locales need, nothing that configures
# pytest, the grader or the user's tools.
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME",
                 "CUDA_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "TRITON_PTXAS_PATH", "GRADER_CALL_TIMEOUT",
                 "GRADER_PERF_WARMUP")
NAMESPACES = ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts")
# Host folders a submission has no business reading: homes (keys, other checkouts), and the places
# Unix sockets live (/run/docker.sock would be root on the host; --unshare-net does not cover them).
HOST_MASKS = ("/root", "/home", "/run", "/var/run", "/var/tmp", "/srv", "/mnt", "/media")


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    sandboxed: bool

    @property
    def summary(self) -> str:
        return "bubblewrap (no network, read-only system, private scratch)" if self.sandboxed \
            else "none (--no-sandbox or bubblewrap not installed)"


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def probe_argv(bwrap: str) -> list[str]:
    """A sandbox that runs `true`: if this fails, bubblewrap cannot work on this machine."""
    return bwrap_argv(["true"], bwrap=bwrap, scratch=Path("/tmp"), cwd=Path("/"), readonly=[], masked=[],
                      device_nodes=[])


def gpu_device_nodes(dev: str = "/dev") -> list[str]:
    """NVIDIA device nodes to pass through: /dev/nvidia0.., nvidiactl, nvidia-uvm*, nvidia-caps/*."""
    nodes = glob.glob(os.path.join(dev, "nvidia*")) + glob.glob(os.path.join(dev, "nvidia-caps", "*"))
    return sorted(node for node in nodes if not os.path.isdir(node))


def child_env(base_env: dict[str, str], *, scratch: Path, pythonpath: Path,
              gpus: list[str] | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A scrubbed environment: caches, HOME and TMPDIR inside scratch, only the plugin given by -p,
    and CUDA_VISIBLE_DEVICES pinned (empty hides every GPU; None leaves the machine's default)."""
    scratch = Path(scratch)
    env = {key: base_env[key] for key in INHERITED_ENV if key in base_env}
    env.update({
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "TRITON_CACHE_DIR": str(scratch / "triton-cache"),
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


def bwrap_argv(command: list[str], *, bwrap: str, scratch: Path, cwd: Path, readonly: list[Path],
               masked: list[Path], device_nodes: list[str], keep_visible: list[Path] = (),
               covers: list[tuple[Path, Path]] = ()) -> list[str]:
    """bubblewrap around `command`. Mount order matters: later mounts cover earlier ones, so the
    masks come after the read-only root and the checker tree and scratch come after the masks.
    Paths in `keep_visible` (the Python install) that a mask covers are bound back read-only.
    Each (source, target) of `covers` binds a writable `source` over `target` in the read-only tree."""
    argv = [bwrap, "--die-with-parent", "--new-session", *NAMESPACES, "--cap-drop", "ALL",
            "--ro-bind", "/", "/", "--dev", "/dev"]
    for node in device_nodes:
        argv += ["--dev-bind", node, node]
    argv += ["--proc", "/proc", "--tmpfs", "/dev/shm", "--tmpfs", "/tmp"]
    for path in masked:
        argv += ["--tmpfs", str(path)]
    # What a mask hid but the child needs (the Python install under /root/.pyenv, a venv in the repo)
    # comes back read-only, then the checker tree.
    for path in keep_visible:
        if any(_inside(path, mask) for mask in masked):
            argv += ["--ro-bind", str(path), str(path)]
    for path in readonly:
        argv += ["--ro-bind", str(path), str(path)]
    for source, target in covers:
        argv += ["--bind", str(source), str(target)]
    argv += ["--bind", str(scratch), str(scratch), "--chdir", str(cwd), "--", *command]
    return argv


def build_launch(command: list[str], *, scratch: Path, checker_root: Path, gpus: list[str] | None,
                 sandbox: bool, bwrap: str | None, base_env: dict[str, str], masked: list[Path] = (),
                 device_nodes: list[str] = (), keep_visible: list[Path] = (),
                 extra_env: dict[str, str] | None = None,
                 disposable_copy: tuple[Path, Path] | None = None) -> Launch:
    """The launch for one submission: `command` runs in `checker_root` (the pristine copy of the
    grader and test suites), inside bubblewrap when `sandbox` and `bwrap` are both given.
    `disposable_copy` = (copy, folder of the checker tree): inside bubblewrap the copy (grader.disposable)
    covers that folder and the checker empties it after collection; without bubblewrap nothing hides
    files from student code, so it is not used."""
    sandboxed = bool(sandbox and bwrap)
    covers = [disposable_copy] if sandboxed and disposable_copy is not None else []
    if covers:
        extra_env = {**(extra_env or {}), disposable.ENV: str(disposable_copy[1])}
    env = child_env(base_env, scratch=scratch, pythonpath=checker_root, gpus=gpus, extra=extra_env)
    if sandboxed:
        argv = bwrap_argv(command, bwrap=bwrap, scratch=scratch, cwd=checker_root,
                          readonly=[checker_root], masked=list(masked),
                          device_nodes=list(device_nodes), keep_visible=list(keep_visible), covers=covers)
        return Launch(argv, env, str(checker_root), True)
    return Launch(list(command), env, str(checker_root), False)


def _inside(path: Path, folder: Path) -> bool:
    """True when `path` is `folder` or below it."""
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False

"""The adversarial gallery: hostile and broken submissions graded by the real runner.

Every folder in tests/submissions/ is one attack: `attack.py` is appended to the reference solution
of its target module (a header line `# target: softmax`), the submission holds the reference modules
named by `# modules:` (default softmax and matmul), and `files/` is copied in beside them as planted
extras. All of them, plus the clean reference, are graded in ONE batch through `grader.grade.runner.grade_all`
(sandboxed when bubblewrap is installed) against the small suite in tests/submissions/_suite. Then,
per attack: its status and reason, the checks it must lose (zero), the checks it must keep (full
points), and for the whole batch: nothing outside the scratch changed, no process of a submission
survives, no network connection arrived. Expected failures (xfail, strict) are holes this gallery
found; the report and SECURITY.md say how to close each.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from grader.grade import cgroups, checking_run, containment, sandbox, sizing
from grader.grade.runner import grade_all

GALLERY = Path(__file__).resolve().parent / "submissions"
SUITE = GALLERY / "_suite"
REPO = Path(__file__).resolve().parent.parent
DEFAULT_MODULES = ("softmax", "matmul")
CALL_TIMEOUT_S = "20"       # per call (includes a fresh worker's start-up on a loaded 2-core box)
GPU_CALL_TIMEOUT_S = "90"   # per call on a GPU: room for cold Triton compiles and autotuning
BATCH_TIMEOUT_S = 150       # per submission: generous, so only a real hang could reach it
GPU_BATCH_TIMEOUT_S = 400

TRITON, FRESH, ONLINE, HIDDEN = ("softmax.gallery.triton", "softmax.gallery.fresh", "softmax.gallery.online",
                                 "softmax.gallery.hidden")
MASKED = "softmax.gallery.masked"
MATMUL, ATTENTION = "matmul.gallery.triton", "flash_attention.gallery.forward"
ATTENTION_MEMORY = "flash_attention.gallery.memory"   # GPU only: not run in the CPU batch
DTYPES = "mixed_precision.gallery.dtypes"
SOFTMAX_ALL = (TRITON, FRESH, ONLINE, HIDDEN)
SOFTMAX_TRITON = (TRITON, FRESH, HIDDEN)     # every check that calls softmax_triton
AS_ROOT = os.geteuid() == 0


def bubblewrap_works() -> bool:
    bwrap = sandbox.find_bwrap()
    if bwrap is None:
        return False
    try:
        return subprocess.run(sandbox.probe_argv(bwrap), capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


SANDBOXED = bubblewrap_works()
CONTAINED = SANDBOXED or containment.works(containment.find_unshare())
needs_containment = pytest.mark.skipif(not CONTAINED, reason="neither bubblewrap nor unshare's pid and mount "
                                       "namespaces work here: nothing holds a submission's processes")
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason="bubblewrap missing or unusable here: graded "
                                   "without a sandbox, which does not contain the filesystem, network or "
                                   "processes")


@dataclass(frozen=True)
class Expect:
    zero: tuple[str, ...] = ()          # checks the attack must not score on
    kept: tuple[str, ...] = ()          # checks it must keep in full (unaffected code)
    message: str = ""                   # regex: a test message of a zero check says why
    status: str = "graded"
    reason: str = ""                    # regex: the run's reason (a run that did not finish says why)
    unseen: str = ""                    # regex: must not appear in what the student is handed


EXPECTED = {
    "clean": Expect(kept=SOFTMAX_ALL + (MASKED, MATMUL, ATTENTION, DTYPES)),
    "hang_loop": Expect(zero=(ONLINE,), kept=SOFTMAX_TRITON + (MATMUL,), message=r"did not return within 20 s"),
    "exit_at_import": Expect(zero=SOFTMAX_ALL, kept=(MATMUL,), message=r"died \(exit code 0\)"),
    "sys_exit_at_import": Expect(zero=SOFTMAX_ALL, kept=(MATMUL,), message=r"SystemExit"),
    "segfault": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"died \(exit code -11\)"),
    "syntax_error": Expect(zero=SOFTMAX_ALL, kept=(MATMUL,), message=r"SyntaxError"),
    "missing_module": Expect(zero=SOFTMAX_ALL, kept=(MATMUL,), message=r"softmax\.py is missing"),
    "import_missing_package": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "uses_missing_package": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL),
                                   message=r"gallery_package_that_does_not_exist cannot be imported.*torch, triton"),
    "flood_stdout": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "orphan_processes": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "memory_creep": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL),
                           message=r"can't allocate memory.*at most \d+ MiB of host memory"),
    "memory_hog": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"MemoryError"),
    "torch_softmax_in_triton": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"uses \.softmax"),
    "torch_matmul_in_triton": Expect(zero=(MATMUL,), kept=SOFTMAX_ALL, message=r"uses \.matmul"),
    "sdpa_in_triton": Expect(zero=(ATTENTION,), kept=SOFTMAX_ALL + (MATMUL,),
                             message=r"scaled_dot_product_attention"),
    "aten_overload_bypass": Expect(zero=(MATMUL,), kept=SOFTMAX_ALL),
    "torch_math_dummy_kernel": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL)),
    "cached_output": Expect(zero=(FRESH,), kept=(TRITON, HIDDEN, ONLINE, MATMUL),
                            message=r"mismatch|no Triton kernel was launched"),
    "mutate_inputs": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"mismatch"),
    "injection_in_messages": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"gallery-xss"),
    "planted_files": Expect(zero=SOFTMAX_ALL, kept=(MATMUL,), message=r"not implemented yet"),
    "read_hidden_tests": Expect(zero=SOFTMAX_ALL, kept=(MATMUL,)),
    "read_host_secrets": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL)),
    "root_only_files": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL),
                              message=r"uid 65534; shadow: (FileNotFoundError|PermissionError); "
                                      r"host: (FileNotFoundError|PermissionError)"),
    "fill_writable_space": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL),
                                  message=r"tmp: ENOSPC; shm: ENOSPC; home: ENOSPC; tmpdir: ENOSPC"),
    "network": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "patch_checker_libs": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"mismatch"),
    "patch_guards": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL)),
    "alias_evades_scan": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL),
                                message=r"torch\.softmax|imports softmax from torch"),
    "lying_subclass": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"subclass|does not accept"),
    "channel_garbage": Expect(zero=SOFTMAX_TRITON, kept=(MATMUL,), message=r"unreadable reply|does not accept"),
    "forge_results_pipe": Expect(zero=SOFTMAX_ALL, kept=(MATMUL,)),
    "escape_filesystem": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "rewrites_own_source": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MASKED, MATMUL), message=r"uses \.softmax"),
    "nested_forbidden_call": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MASKED, MATMUL), message=r"uses \.softmax"),
    "computed_names": Expect(zero=SOFTMAX_TRITON, kept=(MATMUL,),
                             message=r"exec.*attrgetter.*getattr\(\) with a computed name.*dynamic lookup"),
    "sibling_module_alias": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MASKED, MATMUL),
                                   message=r"matmul\.py _rows: uses \.softmax"),
    # ops outside the wrapper allow-list, names stored at import, roots bound to another module
    "torch_addbmm_dummy_launch": Expect(zero=(MATMUL,), kept=SOFTMAX_ALL, message=r"uses torch\.addbmm"),
    "inplace_addmm_dummy_launch": Expect(zero=(MATMUL,), kept=SOFTMAX_ALL, message=r"uses \.addmm_"),
    "unlisted_softmax_ops": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MASKED, MATMUL), message=r"uses \.cummax"),
    # switching the run-time guard off is a finding for the whole module, as a dynamic lookup is
    "helper_stored_at_import": Expect(zero=SOFTMAX_TRITON, kept=(MASKED, MATMUL),
                                      message=r"_rows: uses \.softmax.*DisableTorchFunction|"
                                              r"DisableTorchFunction.*_rows: uses \.softmax"),
    "torch_imported_as_math": Expect(zero=SOFTMAX_TRITON, kept=(MASKED, MATMUL), message=r"uses \.softmax"),
    "wrong_lse_masked_row": Expect(zero=(MASKED,), kept=SOFTMAX_ALL + (MATMUL,), message=r"lse = m \+ log l mismatch"),
    "hung_kernel": Expect(zero=(MATMUL,), kept=SOFTMAX_ALL, message=r"did not return within \d+ s"),
    "code_in_checker_via_listener": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"mismatch"),
    "kill_the_grader": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "host_tmp_files": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "planted_stdlib_modules": Expect(zero=(MATMUL,), kept=SOFTMAX_ALL, message=r"mismatch"),
    "oob_kernel_write": Expect(zero=(MATMUL,), kept=SOFTMAX_ALL + (ATTENTION,),
                               message=r"illegal memory access.*fresh process"),
    # values the checker cannot judge, and replies and notices built by hand on the channel
    "unjudgeable_return_value": Expect(zero=(MASKED,), kept=SOFTMAX_TRITON + (MATMUL,),
                                       message=r"could not judge what your code returned, a str"),
    "compile_notice_flood": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"compile notice"),
    "zero_stride_reply": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MATMUL), message=r"overlapping strides"),
    # timing cheats: correct code, so every correctness check is kept; their perf ratio is judged by
    # test_timing_cheats_gain_nothing_over_the_clean_reference
    "timing_side_stream": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "timing_memo": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    "timing_hbm_thread": Expect(kept=SOFTMAX_ALL + (MATMUL,)),
    # graded alone with its own small worker cap (`# worker-memory:`): the run ends for its memory at
    # the first softmax call, after matmul reported
    "shared_memory_and_forks": Expect(status="crashed", zero=SOFTMAX_ALL, kept=(MATMUL,),
                                      reason=r"more than \d+ MiB of memory.*shared.*memfd"),
    # what a scenario run in the worker observes is the worker's claim: a step in fp32 that rewrites it
    "forged_scenario_claims": Expect(zero=(DTYPES,), kept=SOFTMAX_ALL + (MATMUL,)),
    # the worker's allocator counters are forged to zero while it keeps n x n scores: the driver's figure,
    # read by the checker, shows the growth (GPU only)
    "forged_memory_peak": Expect(zero=(ATTENTION_MEMORY,), kept=SOFTMAX_ALL + (MASKED, MATMUL, ATTENTION),
                                 message=r"grows by .* MiB from n=2048 to n=8192 \(the driver's figure"),
    # hidden tests' names reach the worker (its environment) and its answers reach the report
    "hidden_names_in_messages": Expect(zero=SOFTMAX_TRITON, kept=(ONLINE, MASKED, MATMUL),
                                       unseen=r"test_softmax_triton_longer_row|116, 101, 115, 116, 95, 115"),
}
TIMING_CHEATS = ("timing_side_stream", "timing_memo", "timing_hbm_thread")
GALLERY_PERF = "softmax.gallery.perf"
# A cheat's ratio may exceed the clean reference's by run-to-run noise, not more: copies of the clean
# softmax read 0.986-0.999 of a copy on one H100.
CHEAT_RATIO_TOLERANCE = 1.05

HOLES = {  # attack -> why it still scores today (strict xfail: fixing the hole makes the test pass)
}
# What the gallery grades a `# worker-memory:` entry with: a small checker share too, so the attack
# stays modest (3 GiB) where nothing stops it.
SMALL_CHECKER_MEMORY_MB = 1024


def all_attacks() -> list[str]:
    return sorted(p.name for p in GALLERY.iterdir() if (p / "attack.py").is_file())


def attack_names() -> list[str]:
    """The CPU batch: every attack but those whose fault only a GPU can show (`# device: gpu`); or only
    those named in GALLERY_ATTACKS (comma-separated), with the clean reference, for a quick check."""
    names = [name for name in all_attacks() if header((GALLERY / name / "attack.py").read_text(), "device") != ["gpu"]
             and name not in memory_attack_names()]
    chosen = {name for name in os.environ.get("GALLERY_ATTACKS", "").split(",") if name}
    return [name for name in names if name in chosen | {"clean"}] if chosen else names


def memory_attack_names() -> list[str]:
    """Entries graded in a batch of their own at the worker cap their `# worker-memory:` line names."""
    return [name for name in all_attacks() if header((GALLERY / name / "attack.py").read_text(), "worker-memory")]


def chosen_memory_attacks() -> list[str]:
    chosen = {name for name in os.environ.get("GALLERY_ATTACKS", "").split(",") if name}
    return [name for name in memory_attack_names() if not chosen or name in chosen]


def gpu_attack_names() -> list[str]:
    """The GPU batch: the GPU-only faults, the GPU side of the CPU ones, and the clean reference
    (or only those named in GALLERY_GPU_ATTACKS, comma-separated, for a quick check)."""
    names = sorted(GPU_BATCH + tuple(set(all_attacks()) - set(attack_names()) - set(memory_attack_names())))
    chosen = [name for name in os.environ.get("GALLERY_GPU_ATTACKS", "").split(",") if name]
    return [name for name in names if name in chosen] if chosen else names


GPU_BATCH = ("clean", "hung_kernel", "memory_creep", "segfault")
ON_GPU = torch.cuda.is_available()


def header(text: str, key: str) -> list[str]:
    match = re.search(rf"^# {key}: (.+)$", text, re.MULTILINE)
    return match.group(1).split() if match else []


def build_submission(attack: Path, dest: Path, substitutions: dict[str, str]) -> None:
    """Reference modules + the attack appended to its target module + planted files."""
    text = (attack / "attack.py").read_text()
    for key, value in substitutions.items():
        text = text.replace(key, value)
    dest.mkdir(parents=True)
    targets = header(text, "target")
    for module in header(text, "modules") or DEFAULT_MODULES:
        source = (REPO / "solutions" / f"{module}.py").read_text()
        if module in targets:
            source += f"\n\n# ---- attack: {attack.name} ----\n" + text
        (dest / f"{module}.py").write_text(source)
    if (attack / "files").is_dir():
        shutil.copytree(attack / "files", dest, dirs_exist_ok=True)


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class Listener:
    """Accepts connections on a TCP port of this host's loopback and on a Unix socket in /var/tmp."""

    def __init__(self, token: str):
        self.received: list[str] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.unix_path = f"/var/tmp/gallery-{token}.sock"
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        self.unix.listen()
        self.threads = [threading.Thread(target=self._serve, args=(s, kind), daemon=True)
                        for s, kind in ((self.tcp, "tcp"), (self.unix, "unix"))]
        for thread in self.threads:
            thread.start()

    def _serve(self, server, kind):
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(2)
                try:
                    self.received.append(f"{kind}: {connection.recv(200)!r}")
                except OSError:
                    self.received.append(f"{kind}: connected")

    def close(self):
        for server in (self.tcp, self.unix):
            server.close()
        Path(self.unix_path).unlink(missing_ok=True)


def processes_with(token: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def grade_gallery(root: Path, names: list[str], gpus: str, call_timeout: str, batch_timeout: float,
                  perf: bool = False, per_gpu: int | None = None, worker_memory: int | None = None):
    """Grade `names` in one batch under `root`; yields what the tests look at, then cleans up."""
    token = uuid.uuid4().hex[:12]
    (root / "suite" / "tests_public").mkdir(parents=True)
    (root / "suite" / "tests_hidden").mkdir()
    shutil.copy(SUITE / "public.py", root / "suite" / "tests_public" / "test_gallery.py")
    shutil.copy(SUITE / "hidden.py", root / "suite" / "tests_hidden" / "test_gallery_hidden.py")
    shutil.copytree(SUITE / "points", root / "suite" / "points")
    listener = Listener(token)
    secret = Path(f"/var/tmp/gallery-secret-{token}")   # readable by the grading user only
    with os.fdopen(os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(f"GALLERY-HOST-SECRET-{token}")
    unmasked = Path(f"/var/lib/gallery-secret-{token}")  # a host folder no mask ever covered
    if os.access(unmasked.parent, os.W_OK):
        unmasked.write_text(f"GALLERY-HOST-SECRET-{token}")
    substitutions = {"__TOKEN__": token, "__PORT__": str(listener.port), "__UNIX_SOCKET__": listener.unix_path}
    for name in names:
        build_submission(GALLERY / name, root / "submissions" / name, substitutions)
    before = {name: tree_digest(root / name) for name in ("submissions", "suite")}

    escaped: list[str] = []          # marker files found in the grader's scratch before it is deleted
    real_rmtree = shutil.rmtree

    def inspecting_rmtree(path, *args, **kwargs):
        escaped.extend(str(p) for p in Path(path).rglob(f"gallery-escape-{token}-*"))
        return real_rmtree(path, *args, **kwargs)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(shutil, "rmtree", inspecting_rmtree)
            patch.setenv("GRADER_CALL_TIMEOUT", call_timeout)
            if worker_memory is not None:
                patch.setattr(sizing, "CHECKER_MEMORY_MB", SMALL_CHECKER_MEMORY_MB)
            status = grade_all(root / "submissions", out=root / "out", suite="all", gpus=gpus, jobs=2,
                                      timeout=batch_timeout, tests_root=root / "suite",
                                      points_dir=root / "suite" / "points", no_perf=not perf, quiet=True,
                                      no_sandbox=not SANDBOXED, per_gpu=per_gpu, worker_memory=worker_memory)
    finally:
        listener.close()
        secret.unlink()
        unmasked.unlink(missing_ok=True)
    survivors = processes_with(f"gallery-orphan-{token}")
    on_host = [str(p) for folder in (Path("/var/tmp"), Path("/tmp"), Path("/dev/shm"))
               for p in folder.glob(f"gallery-escape-{token}-*")]
    yield {"root": root, "out": root / "out", "status": status, "token": token, "before": before,
           "names": names, "escaped": escaped + on_host, "on_host": on_host, "survivors": survivors,
           "received": listener.received}
    for pid in survivors:            # started by this test's submissions: end them by id
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    for marker in on_host:
        Path(marker).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Every CPU attack and the clean reference in one batch on the CPU."""
    yield from grade_gallery(tmp_path_factory.mktemp("gallery"), attack_names(), gpus="",
                             call_timeout=CALL_TIMEOUT_S, batch_timeout=BATCH_TIMEOUT_S)


@pytest.fixture(scope="module")
def memory_batch(tmp_path_factory):
    """The `# worker-memory:` entries, alone, at that cap (one value for all of them)."""
    names = chosen_memory_attacks()
    if not names:
        pytest.skip("no memory entry chosen (GALLERY_ATTACKS)")
    caps = {int(header((GALLERY / name / "attack.py").read_text(), "worker-memory")[0]) for name in names}
    assert len(caps) == 1, f"memory entries must share one worker cap, got {sorted(caps)}"
    yield from grade_gallery(tmp_path_factory.mktemp("gallery-memory"), names, gpus="",
                             call_timeout=CALL_TIMEOUT_S, batch_timeout=BATCH_TIMEOUT_S, worker_memory=caps.pop())


@pytest.fixture(scope="module")
def gpu_batch(tmp_path_factory):
    """The GPU batch on every visible GPU (one submission per GPU at a time)."""
    if not ON_GPU:
        pytest.skip("needs CUDA: these faults (a hung kernel on the device, an illegal address) are GPU faults")
    yield from grade_gallery(tmp_path_factory.mktemp("gallery-gpu"), gpu_attack_names(), gpus="all",
                             call_timeout=GPU_CALL_TIMEOUT_S, batch_timeout=GPU_BATCH_TIMEOUT_S)


def graded_folder(batch, name: str) -> Path:
    """The entry's report folder, or a skip when GALLERY_ATTACKS left it out of this batch."""
    if name not in batch["names"]:
        pytest.skip(f"{name} is not in this batch (GALLERY_ATTACKS)")
    return batch["out"] / name


def result_of(batch, name: str) -> dict:
    return json.loads((graded_folder(batch, name) / "result.json").read_text())


def checks_of(result: dict) -> dict[str, dict]:
    return {check["id"]: check for problem in result["problems"] for check in problem["checks"]}


def attack_params():
    params = []
    for name in attack_names():
        marks = []
        if name in HOLES:
            marks.append(pytest.mark.xfail(strict=True, reason=HOLES[name]))
        if name == "forge_results_pipe" and AS_ROOT and not SANDBOXED:
            marks.append(pytest.mark.xfail(strict=True, reason="graded as root without a sandbox: "
                                           "CAP_SYS_PTRACE reaches the checker's results pipe"))
        params.append(pytest.param(name, marks=marks))
    return params


def test_every_attack_has_an_expectation():
    assert sorted(EXPECTED) == all_attacks()


def test_batch_finishes_and_writes_every_submission(batch):
    assert batch["status"] == 0
    graded = sorted(p.name for p in batch["out"].iterdir() if (p / "result.json").is_file())
    assert graded == attack_names()


def assert_attack_outcome(batch, name: str, sandbox_used: str) -> None:
    expect = EXPECTED[name]
    result = result_of(batch, name)
    assert result["status"] == expect.status, result["reason"]
    assert re.search(expect.reason, result["reason"], re.DOTALL), result["reason"]
    if expect.status == "graded":
        assert result["reason"] == "" and result["sandbox"] == sandbox_used
    checks = checks_of(result)
    gained = {check: checks[check]["earned"] for check in expect.zero if checks[check]["earned"] > 0}
    assert not gained, f"{name} scored on checks it must lose: {gained}"
    lost = {check: [t["message"][:300] for t in checks[check]["tests"] if t["outcome"] != "passed"]
            for check in expect.kept if checks[check]["earned"] != checks[check]["points"]}
    assert not lost, f"{name} lost points on code it did not touch: {lost}"
    if expect.message:
        messages = "\n".join(t["message"] for check in expect.zero for t in checks[check]["tests"])
        assert re.search(expect.message, messages, re.DOTALL), messages[:2000]
    if expect.unseen:
        for handed in ("report.html", "gradescope.json"):
            text = (batch["out"] / name / handed).read_text()
            leak = re.search(expect.unseen, text)
            assert leak is None, f"{name}: {handed} shows {leak.group(0)!r}"


@pytest.mark.parametrize("name", attack_params())
def test_attack_scores_nothing_it_should_not_and_keeps_the_rest(batch, name):
    assert_attack_outcome(batch, name, "bubblewrap" if SANDBOXED else "none")


def hole_marks(name: str) -> list:
    if name in HOLES:
        return [pytest.mark.xfail(strict=True, reason=HOLES[name])]
    if cgroups.places().memory is None:
        return [pytest.mark.xfail(strict=True, reason="no cgroup can be made here, so only RLIMIT_DATA bounds "
                                  f"the worker's memory: {cgroups.places().why_not.get('memory')}")]
    return []


NO_PIDS_CGROUP = cgroups.places().pids is None


@pytest.mark.parametrize("name", [pytest.param(name, marks=hole_marks(name)) for name in memory_attack_names()])
def test_memory_attack_ends_its_run_as_the_students_memory_failure(memory_batch, name):
    if name not in memory_batch["names"]:
        pytest.skip(f"{name} is not in this batch (GALLERY_ATTACKS)")
    assert_attack_outcome(memory_batch, name, "bubblewrap" if SANDBOXED else "none")


@pytest.mark.xfail(NO_PIDS_CGROUP, strict=True, reason="no pids cgroup can be made here, and RLIMIT_NPROC "
                   "does not hold for root's processes: a run's processes are unbounded while it lives")
def test_a_runs_processes_are_bounded_while_it_runs(memory_batch):
    if "shared_memory_and_forks" not in memory_batch["names"]:
        pytest.skip("shared_memory_and_forks is not in this batch (GALLERY_ATTACKS)")
    log = (memory_batch["out"] / "shared_memory_and_forks" / "log.txt").read_text()
    started = re.search(r"gallery-forks: started (\d+) of (\d+)", log)
    assert started, log[-2000:]
    assert int(started.group(1)) < int(started.group(2))


@pytest.mark.parametrize("name", gpu_attack_names())
def test_gpu_attack_scores_nothing_it_should_not_and_keeps_the_rest(gpu_batch, name):
    assert_attack_outcome(gpu_batch, name, "bubblewrap" if SANDBOXED else "none")


def test_gpu_batch_finishes_and_the_gpus_are_usable_afterwards(gpu_batch):
    assert gpu_batch["status"] == 0
    graded = sorted(p.name for p in gpu_batch["out"].iterdir() if (p / "result.json").is_file())
    assert graded == gpu_attack_names()
    assert torch.cuda.is_available() and torch.zeros(1, device="cuda").add(1).item() == 1.0


def test_clean_submission_in_the_same_batch_gets_full_marks(batch):
    result = result_of(batch, "clean")
    assert result["status"] == "graded"
    # the GPU-only memory check (2 points) is not run on the CPU: in the total, not in what is possible
    assert result["score"] == {"earned": 22.0, "possible": 22.0, "total": 24.0}


def test_the_clean_reference_passes_the_memory_check_on_the_gpu(gpu_batch):
    check = checks_of(result_of(gpu_batch, "clean"))[ATTENTION_MEMORY]
    assert check["earned"] == check["points"], [t["message"][:600] for t in check["tests"]]


def test_attacks_never_score_more_than_the_clean_reference(batch):
    clean = result_of(batch, "clean")["score"]["earned"]
    for name in attack_names():
        if name not in HOLES and not (name == "forge_results_pipe" and AS_ROOT and not SANDBOXED):
            assert result_of(batch, name)["score"]["earned"] <= clean, name


def test_planted_files_are_ignored_and_listed(batch):
    result = result_of(batch, "planted_files")
    ignored = " ".join(result["ignored"])
    for planted in ("conftest.py", "pytest.ini", "sitecustomize.py", "gallery.pth",
                    "results.jsonl", "result.json", "grader/plugin.py", "tests_hidden/test_gallery_hidden.py"):
        assert planted in ignored, (planted, ignored)
    # an importable name beside the modules is a helper module: staged as assignment/gallery_plugin.py,
    # where nothing but the student's own code could import it (and softmax still scores zero)
    assert list(result["helpers"]) == ["gallery_plugin"]


def test_messages_are_data_not_records_or_markup(batch):
    result = result_of(batch, "injection_in_messages")
    assert result["notes"] == []
    assert not any("forged.py" in test["nodeid"] for check in checks_of(result).values() for test in check["tests"])
    for page in (batch["out"] / "injection_in_messages" / "report.html", batch["out"] / "index.html"):
        text = page.read_text()
        assert "<script>alert('gallery-xss')" not in text and "<img src=x" not in text, page


def test_flood_keeps_the_log_bounded(batch):
    log = graded_folder(batch, "flood_stdout") / "log.txt"
    assert log.stat().st_size <= checking_run.LOG_HEAD + checking_run.LOG_TAIL + 200
    assert len(result_of(batch, "flood_stdout")["log_tail"]) <= 4000


def test_inputs_and_the_suite_are_unchanged(batch):
    for name, digest in batch["before"].items():
        assert tree_digest(batch["root"] / name) == digest, f"{name} changed during grading"


@needs_containment
def test_no_process_of_a_submission_survives(batch):
    assert batch["survivors"] == []


@needs_containment
def test_no_file_is_left_in_the_hosts_tmp_or_shm(batch):
    assert [p for p in batch["on_host"] if p.startswith(("/tmp/", "/dev/shm/"))] == []


def test_the_grader_survives_a_submission_that_tries_to_kill_it(batch):
    """Reaching this test at all means the runner (this process) was not killed mid-batch."""
    assert result_of(batch, "kill_the_grader")["status"] == "graded"


@needs_sandbox
def test_plain_writes_outside_the_scratch_do_not_land(batch):
    plain = [p for p in batch["escaped"] if "remount" not in p]
    assert plain == []


@needs_sandbox
def test_remounting_the_sandbox_read_write_does_not_work(batch):
    """As root, bubblewrap keeps every capability unless told to drop them (--cap-drop ALL)."""
    assert [p for p in batch["escaped"] if "remount" in p] == []


@needs_sandbox
def test_no_tcp_connection_leaves_the_sandbox(batch):
    assert [r for r in batch["received"] if r.startswith("tcp")] == []


@needs_sandbox
def test_no_unix_socket_connection_leaves_the_sandbox(batch):
    assert [r for r in batch["received"] if r.startswith("unix")] == []


@needs_sandbox
def test_hidden_tests_do_not_reach_the_students_report(batch):
    """Without a sandbox the hidden tests stay readable (SECURITY.md): the disposable copy needs bubblewrap."""
    report = (graded_folder(batch, "read_hidden_tests") / "report.html").read_text()
    assert "GALLERY-HIDDEN-SENTINEL" not in report
    assert "no hidden tests found" in report     # the attack ran, looked, and its message reached the report


@needs_sandbox
def test_files_private_to_the_grading_user_do_not_reach_the_report(batch):
    report = (graded_folder(batch, "read_host_secrets") / "report.html").read_text()
    assert f"GALLERY-HOST-SECRET-{batch['token']}" not in report


def test_the_checker_never_imports_a_planted_module(batch):
    """Planted stdlib-named modules print this sentinel when a checker (not the worker) imports them.
    Without a sandbox the worker can write its own checker tree (SECURITY.md), but never another's."""
    logs = {name: (batch["out"] / name / "log.txt").read_text() for name in batch["names"]}
    importers = [name for name, log in logs.items() if "GALLERY-PLANTED-MODULE-IMPORTED-BY-THE-CHECKER" in log]
    assert importers == ([] if SANDBOXED else [name for name in importers if name == "planted_stdlib_modules"])


def test_channel_garbage_is_refused_not_run_by_the_checker(batch):
    messages = [t["message"] for check in checks_of(result_of(batch, "channel_garbage")).values()
                for t in check["tests"]]
    # The garbage frame is refused first and the worker is stopped, so the hostile pickle behind it is
    # never read; either refusal is the defence working.
    assert any(re.search(r"unreadable reply|references (posix|os)\.system, which the checker does not accept", m)
               for m in messages), messages
    assert not any("channel" in p for p in batch["escaped"])


@pytest.fixture(scope="module")
def timing_batch(tmp_path_factory):
    """The timing cheats and the clean reference, graded with perf checks on (GPU only)."""
    if not ON_GPU:
        pytest.skip("needs CUDA: timing cheats play on CUDA streams, events and HBM")
    yield from grade_gallery(tmp_path_factory.mktemp("gallery-timing"), ["clean", *TIMING_CHEATS], gpus="all",
                             call_timeout=GPU_CALL_TIMEOUT_S, batch_timeout=GPU_BATCH_TIMEOUT_S, perf=True,
                             per_gpu=int(os.environ.get("GALLERY_PER_GPU", "0")) or None)


def gallery_perf(batch, name: str) -> tuple[float | None, float]:
    """(the perf test's ratio, or None when it failed before timing ended; the points it earned)."""
    check = checks_of(result_of(batch, name))[GALLERY_PERF]
    ratios = [t["perf"]["ratio"] for t in check["tests"] if t.get("perf")]
    return (ratios[0] if ratios else None), check["earned"]


@pytest.mark.parametrize("name", TIMING_CHEATS)
def test_timing_cheats_gain_nothing_over_the_clean_reference(timing_batch, name):
    clean, clean_points = gallery_perf(timing_batch, "clean")
    cheat, cheat_points = gallery_perf(timing_batch, name)
    print(f"GALLERY-RATIO {name} {cheat} ({cheat_points} points) clean {clean} ({clean_points} points)")
    assert clean is not None, "the clean reference's perf check did not time"
    assert cheat_points <= clean_points
    assert cheat is None or cheat <= clean * CHEAT_RATIO_TOLERANCE, f"{name} timed at {cheat:.3f} against {clean:.3f}"

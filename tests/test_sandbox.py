"""The launch of one checking process: scrubbed environment and the bubblewrap argv (pure), and, when
bubblewrap is installed, that the sandbox really has no network and only its scratch is writable."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import disposable
from grader.grade import sandbox
from grader.grade.sandbox import build_launch, child_env, gpu_device_nodes

BWRAP = sandbox.find_bwrap()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="bubblewrap (bwrap) is not installed: "
                                 "apt-get install -y bubblewrap (make install does it on Debian)")


def _launch(tmp_path, **overrides):
    options = dict(scratch=tmp_path / "scratch", checker_root=tmp_path / "checker", gpus=["1"],
                   sandbox=True, bwrap="/usr/bin/bwrap", base_env={"PATH": "/bin", "SECRET": "x"},
                   masked=[tmp_path / "solutions"], device_nodes=["/dev/nvidia1", "/dev/nvidiactl"])
    options.update(overrides)
    return build_launch(["python", "-m", "pytest"], **options)


def test_child_env_keeps_only_the_allow_list_and_points_caches_into_scratch(tmp_path):
    env = child_env({"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "k", "PYTEST_ADDOPTS": "-p evil",
                     "GRADER_IMPL": "solutions"}, scratch=tmp_path, pythonpath=tmp_path / "c", gpus=["2"])
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PYTEST_ADDOPTS" not in env and "GRADER_IMPL" not in env
    assert env["PATH"] == "/bin"
    for key in ("HOME", "TMPDIR", "TRITON_CACHE_DIR"):
        assert Path(env[key]).parent == tmp_path
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "2"


def test_child_env_hides_every_gpu_with_an_empty_list_and_leaves_default_with_none(tmp_path):
    assert child_env({}, scratch=tmp_path, pythonpath=tmp_path, gpus=[])["CUDA_VISIBLE_DEVICES"] == ""
    assert "CUDA_VISIBLE_DEVICES" not in child_env({}, scratch=tmp_path, pythonpath=tmp_path, gpus=None)


def test_bwrap_launch_starts_empty_unprivileged_offline_and_binds_nothing_writable(tmp_path):
    launch = _launch(tmp_path)
    argv = launch.argv
    assert launch.sandboxed and argv[0] == "/usr/bin/bwrap"
    assert "--unshare-net" in argv and "--die-with-parent" in argv and "--new-session" in argv
    assert "--unshare-user" in argv and argv[argv.index("--uid") + 1] == str(sandbox.SANDBOX_UID) != "0"
    assert ["--ro-bind", "/", "/"] != argv[argv.index("--ro-bind"):argv.index("--ro-bind") + 3]
    assert "/etc" not in argv and "/etc/shadow" not in argv and "/home" not in argv
    assert [argv[i + 1] for i, word in enumerate(argv) if word == "--bind"] == []
    assert ["--dev-bind", "/dev/nvidia1", "/dev/nvidia1"] == argv[argv.index("--dev-bind"):][:3]
    assert argv[argv.index("--"):] == ["--", "python", "-m", "pytest"]
    assert launch.cwd == str(tmp_path / "checker")


def test_every_writable_place_is_a_size_bounded_tmpfs(tmp_path):
    argv = _launch(tmp_path).argv
    tmpfs = {argv[i + 1]: argv[i - 2:i] for i, word in enumerate(argv) if word == "--tmpfs"}
    writable = ["/tmp", "/dev/shm", *map(str, sandbox.scratch_folders(tmp_path / "scratch"))]
    assert sorted(tmpfs) == sorted(writable)
    for target in writable:
        assert tmpfs[target][0] == "--size" and 0 < int(tmpfs[target][1]) <= 1 << 30, target


def test_a_shared_triton_cache_is_named_to_the_child_and_bound_writable_at_its_own_path(tmp_path):
    cache = tmp_path / "runs" / "ann" / "shared-triton-cache"
    launch = _launch(tmp_path, triton_cache=cache)
    argv = launch.argv
    assert launch.env["TRITON_CACHE_DIR"] == str(cache)
    assert [argv[i + 1:i + 3] for i, word in enumerate(argv) if word == "--bind"] == [[str(cache), str(cache)]]
    assert argv.index(str(tmp_path / "scratch" / "home")) < argv.index(str(cache))   # after the scratch
    assert launch.env["HOME"] == str(tmp_path / "scratch" / "home")                 # the rest stays its own
    assert _launch(tmp_path, sandbox=False, triton_cache=cache).env["TRITON_CACHE_DIR"] == str(cache)


def test_without_size_support_the_tmpfs_are_still_mounted(tmp_path):
    argv = _launch(tmp_path, features=frozenset()).argv
    assert "--size" not in argv and argv.count("--tmpfs") == 2 + len(sandbox.scratch_folders(tmp_path))


def test_the_checker_tree_comes_after_the_allow_list_and_scratch_after_it(tmp_path):
    argv = _launch(tmp_path, keep_visible=[tmp_path / "python"]).argv
    assert argv.index(str(tmp_path / "python")) < argv.index(str(tmp_path / "checker")) \
        < argv.index(str(tmp_path / "scratch"))


def test_a_mask_inside_an_allowed_path_is_covered_and_a_python_install_inside_it_bound_back(tmp_path):
    repo, venv = tmp_path / "repo", tmp_path / "repo" / ".venv"
    argv = _launch(tmp_path, masked=[repo], keep_visible=[tmp_path, venv]).argv
    bind_at = argv.index(str(tmp_path)) - 1
    tmpfs_at = argv.index(str(repo)) - 1
    rebind_at = len(argv) - 1 - argv[::-1].index(str(venv)) - 2     # --ro-bind SOURCE DEST: the last DEST
    assert argv[bind_at] == "--ro-bind" and argv[tmpfs_at] == "--tmpfs" and argv[rebind_at] == "--ro-bind"
    assert bind_at < tmpfs_at < rebind_at


def test_a_mask_outside_the_allow_list_needs_no_mount(tmp_path):
    argv = _launch(tmp_path, masked=[tmp_path / "solutions"], keep_visible=[tmp_path / "python"]).argv
    assert str(tmp_path / "solutions") not in argv


def test_the_python_install_is_always_bound_read_only(tmp_path):
    argv = _launch(tmp_path, masked=[], keep_visible=[tmp_path / "python"]).argv
    at = argv.index(str(tmp_path / "python"))
    assert argv[at - 1:at + 2] == ["--ro-bind", str(tmp_path / "python"), str(tmp_path / "python")]


def test_python_paths_cover_the_prefixes_executable_and_sys_path_but_not_own_pythonpath_or_cwd(tmp_path):
    repo = str(Path(sandbox.__file__).parents[2])
    paths = sandbox.python_paths(environ={"PYTHONPATH": repo})
    shown = [str(p) for p in paths]
    assert sys.prefix in shown and sys.base_prefix in shown and os.path.realpath(sys.executable) in shown
    site_packages = [entry for entry in sys.path if entry.endswith("-packages") and os.path.isdir(entry)]
    assert site_packages
    for entry in site_packages:
        assert any(entry == s or entry.startswith(s + os.sep) for s in shown), entry
    assert repo not in shown and os.getcwd() not in shown and "/tmp" not in shown


def test_editable_roots_come_from_pth_lines_and_setuptools_finders_except_this_project(tmp_path):
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "tool.pth").write_text(f"# comment\nimport os\n{tmp_path / 'src-tool'}\n")
    (site / "__editable___other_1_0_finder.py").write_text(
        f"MAPPING: dict[str, str] = {{'other': {str(tmp_path / 'other' / 'other')!r}}}\n")
    (site / f"__editable___{sandbox.OWN_DISTRIBUTION}_0_1_0_finder.py").write_text(
        "MAPPING = {'grader': '/staff/repo/grader'}\n")
    roots = sandbox.editable_roots(str(site))
    assert sorted(roots) == sorted([str(tmp_path / "src-tool"), str(tmp_path / "other" / "other")])


def test_the_executable_chain_follows_every_symlink(tmp_path):
    (tmp_path / "real").write_text("")
    (tmp_path / "python3").symlink_to("real")
    (tmp_path / "python").symlink_to(tmp_path / "python3")
    chain = sandbox.executable_chain(str(tmp_path / "python"))
    assert chain[:3] == [str(tmp_path / "python"), str(tmp_path / "python3"), str(tmp_path / "real")]


def test_no_sandbox_runs_the_command_itself(tmp_path):
    launch = _launch(tmp_path, sandbox=False)
    assert launch.argv == ["python", "-m", "pytest"] and not launch.sandboxed
    assert "none" in launch.summary
    assert _launch(tmp_path, bwrap=None).sandboxed is False


def test_gpu_device_nodes_lists_nvidia_nodes_only(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "null"):
        (tmp_path / name).write_text("")
    (tmp_path / "nvidia-caps").mkdir()
    (tmp_path / "nvidia-caps" / "nvidia-cap1").write_text("")
    nodes = [Path(node).name for node in gpu_device_nodes(str(tmp_path))]
    assert nodes == ["nvidia-cap1", "nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]


def _run_inside(tmp_path, code, **options):
    scratch, checker = tmp_path / "scratch", tmp_path / "checker"
    for folder in (scratch, checker, *sandbox.scratch_folders(scratch)):
        folder.mkdir(parents=True, exist_ok=True)
    launch = build_launch([sys.executable, "-c", code], scratch=scratch, checker_root=checker, gpus=[],
                          sandbox=True, bwrap=BWRAP, base_env={"PATH": "/usr/bin:/bin"},
                          keep_visible=sandbox.python_paths(), **options)
    return subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True, timeout=60)


@needs_bwrap
def test_inside_bwrap_network_is_down_and_only_scratch_tmpfs_are_writable(tmp_path):
    hidden = tmp_path / "solutions"
    hidden.mkdir()
    (hidden / "answer.py").write_text("ANSWER = 42\n")
    probe = (
        "import os, socket\n"
        "try:\n socket.create_connection(('1.1.1.1', 80), timeout=2); print('net up')\n"
        "except OSError: print('net down')\n"
        f"print('hidden', os.path.exists({str(hidden / 'answer.py')!r}))\n"
        "for path in (%r, %r, %r):\n"
        " try:\n  open(os.path.join(path, 'x'), 'w').write('1'); print('wrote', os.path.basename(path))\n"
        " except OSError: print('refused', os.path.basename(path))\n"
        % (str(tmp_path / "scratch" / "home"), str(tmp_path / "scratch"), str(tmp_path / "checker")))
    done = _run_inside(tmp_path, probe, masked=[hidden])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:5] == ["net down", "hidden False", "wrote home", "refused scratch",
                                           "refused checker"]


@needs_bwrap
def test_inside_bwrap_the_child_is_not_root_and_reads_no_host_secret(tmp_path):
    secret = Path("/var/lib") / f"env-test-secret-{os.getpid()}"      # outside every old mask
    secret.write_text("host secret")
    try:
        probe = ("import os\nprint(os.getuid(), os.getgid())\n"
                 f"for path in ('/etc/shadow', {str(secret)!r}, '/root', '/home'):\n"
                 " try:\n  open(path).read(); print('read', path)\n"
                 " except OSError as e: print('no', path, type(e).__name__)\n")
        done = _run_inside(tmp_path, probe)
    finally:
        secret.unlink()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{sandbox.SANDBOX_UID} {sandbox.SANDBOX_GID}"
    assert not [line for line in lines[1:] if line.startswith("read")], lines


@needs_bwrap
def test_filling_a_writable_place_fails_with_no_space_left(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "TMPFS_MIB", {"/tmp": 1, "/dev/shm": 1})
    monkeypatch.setattr(sandbox, "SCRATCH_TMPFS_MIB", 1)
    probe = ("import os, errno\n"
             f"for folder in ('/tmp', '/dev/shm', {str(tmp_path / 'scratch' / 'home')!r}):\n"
             " try:\n  open(os.path.join(folder, 'fill'), 'wb').write(b'0' * (3 << 20)); print('filled', folder)\n"
             " except OSError as e: print(errno.errorcode[e.errno], folder)\n")
    done = _run_inside(tmp_path, probe)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["ENOSPC"] * 3, done.stdout


def test_a_disposable_copy_covers_its_folder_after_the_checker_tree_and_is_named_to_the_checker(tmp_path):
    copy, covered = tmp_path / "scratch" / "hidden-suite", tmp_path / "checker" / "tests_hidden"
    launch = _launch(tmp_path, disposable_copy=(copy, covered))
    argv = launch.argv
    cover_at = argv.index(str(copy)) - 1
    assert argv[cover_at:cover_at + 3] == ["--bind", str(copy), str(covered)]
    assert argv.index(str(tmp_path / "checker")) < cover_at   # after the read-only checker tree
    assert launch.env[disposable.ENV] == str(covered)


def test_without_bubblewrap_no_copy_is_used_and_nothing_is_named(tmp_path):
    copy, covered = tmp_path / "scratch" / "hidden-suite", tmp_path / "checker" / "tests_hidden"
    launch = _launch(tmp_path, sandbox=False, disposable_copy=(copy, covered))
    assert disposable.ENV not in launch.env and str(copy) not in launch.argv


@needs_bwrap
def test_inside_bwrap_the_copy_replaces_the_checker_trees_folder_and_can_be_emptied(tmp_path):
    scratch, checker = tmp_path / "scratch", tmp_path / "checker"
    (checker / "tests_hidden").mkdir(parents=True)
    (checker / "tests_hidden" / "test_shared.py").write_text("SHARED = 1\n")
    (checker / "grader").mkdir()              # the checker imports grader from its tree, as when grading
    for name in ("__init__.py", "disposable.py"):
        (checker / "grader" / name).write_text((Path(disposable.__file__).parent / name).read_text())
    for folder in (scratch, *sandbox.scratch_folders(scratch)):      # the runner makes them before launch
        folder.mkdir()
    source = tmp_path / "source"
    source.mkdir()
    (source / "test_own.py").write_text("OWN = 1\n")
    copy = disposable.make_copy(source, scratch / "hidden-suite")
    probe = ("import os\nfrom grader import disposable\n"
             "print(sorted(os.listdir('tests_hidden')))\n"
             "disposable.empty_named_copy()\n"
             "print(sorted(os.listdir('tests_hidden')))\n")
    launch = build_launch([sys.executable, "-c", probe], scratch=scratch, checker_root=checker, gpus=[],
                          sandbox=True, bwrap=BWRAP, base_env={"PATH": "/usr/bin:/bin"},
                          keep_visible=sandbox.python_paths(), disposable_copy=(copy, checker / "tests_hidden"))
    done = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(sorted([disposable.MARKER, "test_own.py"])), "[]"]
    assert list(copy.iterdir()) == [] and (checker / "tests_hidden" / "test_shared.py").is_file()


TINY_POINTS = '''
[problem]
id = "softmax"
title = "Tiny"
order = 1
[checks."softmax.double"]
points = 2
description = "double(x) is 2x"
'''
TINY_TEST = '''
import pytest

@pytest.mark.check("softmax.double")
def test_double(impl):
    assert impl.softmax.double(2) == 4
'''


@needs_bwrap
def test_a_venv_under_tmp_grades_sandboxed(tmp_path):
    """A TA's `python3 -m venv /tmp/...`: before the allow-list bound the interpreter back, bubblewrap's
    empty /tmp hid it and every run ended with `bwrap: execvp ... No such file or directory`."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)
    suite = tmp_path / "suite"
    (suite / "points").mkdir(parents=True)
    (suite / "points" / "softmax.toml").write_text(TINY_POINTS)
    for folder in ("tests_public", "tests_hidden"):
        (suite / folder).mkdir()
    (suite / "tests_public" / "test_tiny.py").write_text(TINY_TEST)
    (tmp_path / "subs" / "good").mkdir(parents=True)
    (tmp_path / "subs" / "good" / "softmax.py").write_text("def double(x):\n    return 2 * x\n")
    code = ("import sys\nfrom grader.grade.runner import grade_all\n"
            f"sys.exit(grade_all({str(tmp_path / 'subs')!r}, out={str(tmp_path / 'out')!r}, gpus='', jobs=1, "
            f"tests_root={str(suite)!r}, points_dir={str(suite / 'points')!r}, no_perf=True, quiet=True))\n")
    repo = Path(sandbox.__file__).resolve().parents[2]
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "good" / "result.json").read_text())
    assert result["sandbox"] == "bubblewrap" and result["status"] == "graded", result["reason"]
    assert result["score"]["earned"] == result["score"]["possible"] == 2

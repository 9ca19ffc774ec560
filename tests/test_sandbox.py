"""The launch of one checking process: scrubbed environment and the bubblewrap argv (pure), and, when
bubblewrap is installed, that the sandbox really has no network and only its scratch is writable."""

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


def test_bwrap_launch_has_no_network_read_only_root_and_one_writable_folder(tmp_path):
    launch = _launch(tmp_path)
    argv = launch.argv
    assert launch.sandboxed and argv[0] == "/usr/bin/bwrap"
    assert "--unshare-net" in argv and "--die-with-parent" in argv and "--new-session" in argv
    assert argv[argv.index("--ro-bind"):argv.index("--ro-bind") + 3] == ["--ro-bind", "/", "/"]
    binds = [argv[i + 1] for i, word in enumerate(argv) if word == "--bind"]
    assert binds == [str(tmp_path / "scratch")]
    assert ["--dev-bind", "/dev/nvidia1", "/dev/nvidia1"] == argv[argv.index("--dev-bind"):][:3]
    assert argv[argv.index("--"):] == ["--", "python", "-m", "pytest"]
    assert launch.cwd == str(tmp_path / "checker")


def test_masks_come_before_the_checker_tree_and_scratch_binds(tmp_path):
    argv = _launch(tmp_path).argv
    mask = argv.index(str(tmp_path / "solutions"))
    assert argv[mask - 1] == "--tmpfs"
    assert mask < argv.index(str(tmp_path / "checker")) < argv.index(str(tmp_path / "scratch"))


def test_a_masked_python_install_is_bound_back_read_only_after_the_mask(tmp_path):
    mask, venv = tmp_path / "venv-parent", tmp_path / "venv-parent" / ".venv"
    argv = _launch(tmp_path, masked=[mask], keep_visible=[venv]).argv
    tmpfs_at = argv.index(str(mask)) - 1
    rebind_at = argv.index(str(venv)) - 1
    assert argv[tmpfs_at] == "--tmpfs" and argv[rebind_at] == "--ro-bind" and rebind_at > tmpfs_at


def test_an_unmasked_python_install_is_not_bound_again(tmp_path):
    argv = _launch(tmp_path, masked=[tmp_path / "other"], keep_visible=[tmp_path / "python"]).argv
    assert str(tmp_path / "python") not in argv


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


@needs_bwrap
def test_inside_bwrap_network_is_down_and_only_scratch_is_writable(tmp_path):
    scratch, checker, hidden = tmp_path / "scratch", tmp_path / "checker", tmp_path / "solutions"
    for folder in (scratch, checker, hidden):
        folder.mkdir()
    (hidden / "answer.py").write_text("ANSWER = 42\n")
    probe = (
        "import os, socket\n"
        "try:\n socket.create_connection(('1.1.1.1', 80), timeout=2); print('net up')\n"
        "except OSError: print('net down')\n"
        f"print('hidden', os.listdir({str(hidden)!r}))\n"
        "for path in (%r, %r):\n"
        " try:\n  open(os.path.join(path, 'x'), 'w').write('1'); print('wrote', os.path.basename(path))\n"
        " except OSError: print('refused', os.path.basename(path))\n" % (str(scratch), str(checker)))
    launch = build_launch([sys.executable, "-c", probe], scratch=scratch, checker_root=checker, gpus=[],
                          sandbox=True, bwrap=BWRAP, base_env={"PATH": "/usr/bin:/bin"}, masked=[hidden],
                          keep_visible=[Path(sys.prefix)])
    done = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == ["net down", "hidden []", "wrote scratch", "refused checker"]


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
    scratch.mkdir()
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
                          keep_visible=[Path(sys.prefix)], disposable_copy=(copy, checker / "tests_hidden"))
    done = subprocess.run(launch.argv, env=launch.env, cwd=launch.cwd, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(sorted([disposable.MARKER, "test_own.py"])), "[]"]
    assert list(copy.iterdir()) == [] and (checker / "tests_hidden" / "test_shared.py").is_file()

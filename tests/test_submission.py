"""Submission intake: what is copied, what is ignored and listed, and which archives are refused."""

import io
import os
import tarfile
import zipfile

import pytest

from grader.grade import submission
from grader.errors import BadSubmission
from grader.grade.submission import Source, find_submissions, read_metadata, stage


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _tar(path, members):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_find_submissions_takes_folders_and_archives_with_ids_from_names(tmp_path):
    (tmp_path / "alice").mkdir()
    _zip(tmp_path / "bob.zip", {"matmul.py": "x = 1\n"})
    _tar(tmp_path / "carol.tar.gz", {"matmul.py": b"x = 1\n"})
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / ".DS_Store").write_text("")
    sources, skipped = find_submissions(tmp_path)
    assert [(s.id, s.kind) for s in sources] == [("alice", "folder"), ("bob", "archive"),
                                                 ("carol", "archive")]
    assert skipped == ["notes.txt (not a folder or a .zip/.tar/.tar.gz/.tgz archive)"]


def test_find_submissions_skips_a_second_submission_with_the_same_id(tmp_path):
    (tmp_path / "alice").mkdir()
    _zip(tmp_path / "alice.zip", {"matmul.py": "x = 1\n"})
    sources, skipped = find_submissions(tmp_path)
    assert [s.path.name for s in sources] == ["alice"]
    assert "same id 'alice'" in skipped[0]


def test_submission_id_is_safe_as_a_folder_name(tmp_path):
    assert submission.submission_id(tmp_path / "Jo Smith (late).zip") == "Jo_Smith_late"
    assert submission.submission_id(tmp_path / "x.rar") is None


def test_stage_copies_only_allow_listed_modules_and_lists_the_rest(tmp_path):
    folder = tmp_path / "alice"
    (folder / "assignment").mkdir(parents=True)
    (folder / "assignment" / "matmul.py").write_text("MATMUL = 1\n")
    (folder / "softmax.py").write_text("SOFTMAX = 1\n")
    (folder / "conftest.py").write_text("import os; os._exit(0)\n")
    (folder / "torch.py").write_text("")
    staged = stage(Source("alice", folder), tmp_path / "impl")
    copied = sorted(p.name for p in (tmp_path / "impl" / "assignment").iterdir())
    assert copied == ["__init__.py", "matmul.py", "softmax.py"]
    assert sorted(staged.files) == ["matmul", "softmax"]
    assert "conftest.py (not an assignment module file)" in staged.ignored
    assert "torch.py (not an assignment module file)" in staged.ignored
    assert staged.missing == ["accounting", "mixed_precision", "flash_attention"]


def test_stage_prefers_assignment_folder_over_flat_duplicate(tmp_path):
    folder = tmp_path / "alice"
    (folder / "assignment").mkdir(parents=True)
    (folder / "matmul.py").write_text("FLAT = 1\n")
    (folder / "assignment" / "matmul.py").write_text("NESTED = 1\n")
    staged = stage(Source("alice", folder), tmp_path / "impl")
    assert (tmp_path / "impl" / "assignment" / "matmul.py").read_text() == "NESTED = 1\n"
    assert staged.ignored == ["matmul.py (duplicate of assignment/matmul.py)"]


def test_stage_accepts_one_wrapper_folder_inside_an_archive(tmp_path):
    archive = _zip(tmp_path / "bob.zip", {"bob/assignment/softmax.py": "S = 2\n", "bob/README.md": "hi"})
    staged = stage(Source("bob", archive), tmp_path / "impl")
    assert list(staged.files) == ["softmax"]
    assert staged.ignored == ["bob/README.md (not an assignment module file)"]


def test_stage_does_not_follow_symlinks_in_folders(tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 1\n")
    folder = tmp_path / "eve"
    folder.mkdir()
    os.symlink(secret, folder / "matmul.py")
    staged = stage(Source("eve", folder), tmp_path / "impl")
    assert staged.files == {}
    assert staged.ignored == ["matmul.py (symbolic link)"]


def test_content_hash_changes_only_when_staged_files_change(tmp_path):
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "matmul.py").write_text("A = 1\n")
    first = stage(Source("alice", folder), tmp_path / "one").content_hash
    (folder / "notes.txt").write_text("ignored files do not count")
    assert stage(Source("alice", folder), tmp_path / "two").content_hash == first
    (folder / "matmul.py").write_text("A = 2\n")
    assert stage(Source("alice", folder), tmp_path / "three").content_hash != first


@pytest.mark.parametrize("name", ["../evil/matmul.py", "/etc/matmul.py", "a/../../matmul.py"])
def test_zip_with_path_traversal_is_refused(tmp_path, name):
    archive = _zip(tmp_path / "eve.zip", {name: "x = 1\n"})
    with pytest.raises(BadSubmission, match="path traversal"):
        stage(Source("eve", archive), tmp_path / "impl")
    assert not (tmp_path / "evil").exists()


def test_tar_with_a_symlink_is_refused(tmp_path):
    path = tmp_path / "eve.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("matmul.py")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        archive.addfile(info)
    with pytest.raises(BadSubmission, match="link or device"):
        stage(Source("eve", path), tmp_path / "impl")


def test_zip_with_a_symlink_is_refused(tmp_path):
    path = tmp_path / "eve.zip"
    with zipfile.ZipFile(path, "w") as archive:
        info = zipfile.ZipInfo("matmul.py")
        info.external_attr = (0o120777 << 16)
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(BadSubmission, match="link or device"):
        stage(Source("eve", path), tmp_path / "impl")


def test_zip_bomb_is_refused_by_total_size(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_TOTAL_BYTES", 1000)
    path = tmp_path / "eve.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("padding.bin", b"\0" * 5000)       # compresses to a few bytes
    with pytest.raises(BadSubmission, match="zip bomb"):
        stage(Source("eve", path), tmp_path / "impl")


def test_huge_module_file_is_ignored_with_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILE_BYTES", 100)
    archive = _zip(tmp_path / "eve.zip", {"matmul.py": "#" * 500, "softmax.py": "S = 1\n"})
    staged = stage(Source("eve", archive), tmp_path / "impl")
    assert list(staged.files) == ["softmax"]
    assert staged.ignored == ["matmul.py (500 bytes, over the 100-byte cap)"]


def test_corrupt_archive_is_a_bad_submission(tmp_path):
    path = tmp_path / "eve.zip"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(BadSubmission, match="unreadable archive"):
        stage(Source("eve", path), tmp_path / "impl")


def test_metadata_csv_gives_late_flags(tmp_path):
    (tmp_path / "metadata.csv").write_text("id,late,submitted_at\nalice,yes,2026-01-02\nbob,0,\n")
    assert read_metadata(tmp_path) == {"alice": {"late": True, "submitted_at": "2026-01-02"},
                                       "bob": {"late": False, "submitted_at": ""}}
    assert read_metadata(tmp_path / "nowhere") == {}

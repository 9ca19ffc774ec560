"""Submission intake: what is copied, what is ignored and listed, and which archives are refused."""

import io
import os
import tarfile
import time
import zipfile

import pytest
from hostile_archives import (
    ignored_names_flood,
    pax_records_bomb,
    tar_member,
    write_tar,
    zip_with_bad_crc,
    zip_with_utf8_flag_and_bad_name,
)

from grader.errors import BadSubmission
from grader.grade import archives, submission
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


def test_two_submissions_with_one_id_are_one_not_gradable_submission_naming_both(tmp_path):
    # `victim/` and `victim.zip` used to drop one of the two silently
    (tmp_path / "alice").mkdir()
    _zip(tmp_path / "alice.zip", {"matmul.py": "x = 1\n"})
    sources, skipped = find_submissions(tmp_path)
    assert [s.id for s in sources] == ["alice"] and skipped == []
    with pytest.raises(BadSubmission, match=r"alice and alice.zip both stand for the id 'alice'"):
        stage(sources[0], tmp_path / "impl")


@pytest.mark.parametrize("name", ["grades.csv", "index.html", "Index.HTML.zip", "grades.csv.tmp"])
def test_an_id_named_like_a_class_file_is_kept_apart_and_not_gradable(tmp_path, name):
    _zip(tmp_path / name, {"matmul.py": "x = 1\n"}) if name.endswith(".zip") else (tmp_path / name).mkdir()
    (source,), _ = find_submissions(tmp_path)
    assert source.id.startswith("_") and source.id[1:].lower() == name.lower().removesuffix(".zip")
    with pytest.raises(BadSubmission, match="name of a class output file"):
        stage(source, tmp_path / "impl")


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
    assert any(line.startswith("conftest.py (not graded: a helper may not be named like") for line in staged.ignored)
    assert any(line.startswith("torch.py (not graded: a helper may not be named like") for line in staged.ignored)
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
    monkeypatch.setattr(archives, "MAX_TOTAL_BYTES", 1000)   # in this process: stage_here, not the child
    path = tmp_path / "eve.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("padding.bin", b"\0" * 5000)       # compresses to a few bytes
    with pytest.raises(BadSubmission, match="zip bomb"):
        submission.stage_here(Source("eve", path), tmp_path / "impl")


def test_huge_module_file_is_ignored_with_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(archives, "MAX_FILE_BYTES", 100)
    archive = _zip(tmp_path / "eve.zip", {"matmul.py": "#" * 500, "softmax.py": "S = 1\n"})
    staged = submission.stage_here(Source("eve", archive), tmp_path / "impl")
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


# --- hostile archives: each refused or bounded, as this submission's problem only ---------------------


def test_zip_with_a_bad_crc_is_a_bad_submission_not_a_crash(tmp_path):
    with pytest.raises(BadSubmission, match=r"eve\.zip: unreadable archive \(BadZipFile: Bad CRC-32"):
        stage(Source("eve", zip_with_bad_crc(tmp_path / "eve.zip")), tmp_path / "impl")


def test_zip_with_the_utf8_flag_on_a_name_that_is_not_utf8_is_a_bad_submission(tmp_path):
    with pytest.raises(BadSubmission, match=r"eve\.zip: unreadable archive \(UnicodeDecodeError"):
        stage(Source("eve", zip_with_utf8_flag_and_bad_name(tmp_path / "eve.zip")), tmp_path / "impl")


def test_names_that_are_not_utf8_are_listed_escaped(tmp_path):
    folder = tmp_path / "eve"
    folder.mkdir()
    (folder / "matmul.py").write_text("x = 1\n")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "w") as handle:
        handle.write("latin-1 name")
    archive = write_tar(tmp_path / "eve.tar", [tar_member(b"caf\xe9.txt"), tar_member(b"matmul.py", b"x = 1\n")])
    for source in (Source("eve", folder), Source("eve", archive)):
        staged = stage(source, tmp_path / f"impl-{source.kind}")
        assert list(staged.files) == ["matmul"]
        assert staged.ignored == ["caf\\xe9.txt (not an assignment module file)"]


def test_a_huge_pax_header_is_refused_without_parsing_it(tmp_path):
    # 1 MiB of records: the stdlib's parser took the grader to 1 GB on this shape
    path = pax_records_bomb(tmp_path / "eve.tar", 1 << 20)
    started = time.perf_counter()
    with pytest.raises(BadSubmission, match=r"extended tar header of \d+ bytes"):
        stage(Source("eve", path), tmp_path / "impl")
    assert time.perf_counter() - started < 5


def test_a_small_pax_header_of_quadratic_shape_is_read_in_linear_time(tmp_path):
    path = pax_records_bomb(tmp_path / "eve.tar", archives.MAX_EXTENDED_BYTES - 8)
    started = time.perf_counter()
    with pytest.raises(BadSubmission, match="malformed PAX header"):
        submission.stage_here(Source("eve", path), tmp_path / "impl")
    assert time.perf_counter() - started < 0.5


def test_a_flood_of_ignored_names_gives_a_bounded_listing(tmp_path):
    # 0.3 MB of such names once wrote 245 MB of report
    path = ignored_names_flood(tmp_path / "eve.tar.gz", count=1500)
    staged = stage(Source("eve", path), tmp_path / "impl")
    assert list(staged.files) == ["matmul"]
    assert len(staged.ignored) == submission.MAX_LISTED + 1 and staged.ignored[-1] == "... and 1400 more files"
    assert sum(len(line) for line in staged.ignored) < 40_000


def test_more_header_bytes_than_the_cap_are_refused(tmp_path):
    path = ignored_names_flood(tmp_path / "eve.tar.gz", count=5000)
    assert path.stat().st_size < 400_000
    with pytest.raises(BadSubmission, match=r"more than \d+ bytes of tar headers"):
        stage(Source("eve", path), tmp_path / "impl")


def test_long_and_non_ascii_names_written_by_tarfile_are_read(tmp_path):
    long_folder = "w" * 120
    for form in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        path = tmp_path / f"ok{form}.tar.gz"
        with tarfile.open(path, "w:gz", format=form) as archive:
            for name, data in ((f"{long_folder}/assignment/matmul.py", b"M = 1\n"), ("r\u00e9sum\u00e9.txt", b"hi")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        staged = stage(Source("ok", path), tmp_path / f"impl{form}")
        assert list(staged.files) == ["matmul"], form
        assert staged.ignored == ["r\u00e9sum\u00e9.txt (not an assignment module file)"], form


def test_staging_that_takes_too_long_is_a_bad_submission(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "STAGING_TIMEOUT_S", 0.001)
    with pytest.raises(BadSubmission, match="unpacking took over"):
        stage(Source("eve", _zip(tmp_path / "eve.zip", {"matmul.py": "x = 1\n"})), tmp_path / "impl")


def test_staging_runs_under_a_memory_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "STAGING_MEMORY_BYTES", 1 << 20)   # below what the child already holds
    module = "#" * (900 << 10)                                          # reading it needs fresh memory
    with pytest.raises(BadSubmission, match=r"needs over 1 MiB|unpacking it failed \(exit code"):
        stage(Source("eve", _zip(tmp_path / "eve.zip", {"matmul.py": module})), tmp_path / "impl")


def test_module_files_are_found_at_any_depth_and_where_is_recorded(tmp_path):
    folder = tmp_path / "alice" / "my-repo" / "cs336_systems"
    folder.mkdir(parents=True)
    (folder / "softmax.py").write_text("S = 1\n")
    (folder / "flash_attention.py").write_text("F = 1\n")
    staged = stage(Source("alice", tmp_path / "alice"), tmp_path / "impl")
    assert sorted(staged.files) == ["flash_attention", "softmax"]
    assert staged.found == {"softmax": "my-repo/cs336_systems/softmax.py",
                            "flash_attention": "my-repo/cs336_systems/flash_attention.py"}
    assert (tmp_path / "impl" / "assignment" / "softmax.py").read_text() == "S = 1\n"


def test_copies_of_one_module_that_tie_are_named_as_candidates_and_none_is_taken(tmp_path):
    archive = _zip(tmp_path / "bob.zip", {"old/v1/softmax.py": "A = 1\n", "new/v2/softmax.py": "B = 1\n",
                                          "new/v2/matmul.py": "M = 1\n"})
    staged = stage(Source("bob", archive), tmp_path / "impl")
    assert list(staged.files) == ["matmul"]
    assert staged.missing_reasons["softmax"] == ("softmax.py is there 2 times (new/v2/softmax.py, "
                                                 "old/v1/softmax.py): keep exactly one")


@pytest.mark.parametrize("name, module", [("Matmul.py", "matmul"), ("softmax.py.txt", "softmax"),
                                          ("flash-attention.py", "flash_attention")])
def test_near_miss_names_get_did_you_mean_and_the_reason_says_so(tmp_path, name, module):
    archive = _zip(tmp_path / "carol.zip", {name: "X = 1\n"})
    staged = stage(Source("carol", archive), tmp_path / "impl")
    assert staged.files == {} and f"{name} (did you mean {module}.py?)" in staged.ignored
    assert f"did you mean {module}.py? found {name}" in staged.nothing_reason()


def test_helper_modules_beside_the_modules_are_staged_and_counted_in_the_hash(tmp_path):
    folder = tmp_path / "dana" / "assignment"
    folder.mkdir(parents=True)
    (folder / "softmax.py").write_text("from .utils import f\n")
    (folder / "utils.py").write_text("def f(): return 1\n")
    (folder / "kernels").mkdir()
    (folder / "kernels" / "attn.py").write_text("A = 1\n")
    staged = stage(Source("dana", tmp_path / "dana"), tmp_path / "one")
    assert list(staged.files) == ["softmax"] and list(staged.helpers) == ["utils"]
    assert (tmp_path / "one" / "assignment" / "utils.py").read_text() == "def f(): return 1\n"
    assert "assignment/kernels/attn.py (not graded: in a subfolder; helper modules sit directly beside the " \
           "module files)" in staged.ignored
    (folder / "utils.py").write_text("def f(): return 2\n")
    assert stage(Source("dana", tmp_path / "dana"), tmp_path / "two").content_hash != staged.content_hash

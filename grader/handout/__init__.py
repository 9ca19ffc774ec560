"""The handout builder: stubs from solutions/, the student handout folder and tarball, and its proofs.

- `stubs`: solution regions (`# BEGIN SOLUTION` ... `# END SOLUTION`) become `NotImplementedError`.
- `writeup`: the problem write-up (Markdown and HTML) rendered from `handout/` templates and the points files.
- `build`: assembles `dist/handout/` and `dist/handout.tar.gz`.
- `verify`: proves the handout consistent (solutions full marks, stubs zero, nothing hidden leaks,
  the unpacked handout installs and runs `make test`).
"""

AUDIENCE = "staff"   # builds the handout; never shipped, never graded with (grader/layout.py)
# Caches Python and pytest write beside the files: the build never ships them, and its proofs ignore them.
SKIP_NAMES = frozenset({"__pycache__", ".pytest_cache"})


def is_cache(relative) -> bool:
    """Whether a path (relative to the tree it is in, a pathlib.Path) is a cache the build leaves out."""
    return bool(SKIP_NAMES.intersection(relative.parts)) or relative.suffix == ".pyc"

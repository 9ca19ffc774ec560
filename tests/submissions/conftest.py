"""Nothing under tests/submissions is a test of this repo: the folders are hostile submissions (one of
them plants its own conftest.py and test files) that tests/test_adversarial.py grades in a sandbox."""

collect_ignore_glob = ["*"]

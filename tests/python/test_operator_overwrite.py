"""`sparkglm recipe apply` over an existing profile asks before it overwrites, through a real
pseudo-terminal: "n" (or just Enter) changes nothing, "y" replaces the file and keeps the old one as
a backup; with no terminal and no --yes it refuses and writes nothing; --yes answers yes.

Run: python3 test_operator_overwrite.py --bin-dir BUILD_DIR
"""
import glob
import os
import pty
import select
import subprocess
import tempfile
import time
import unittest

import test_operator_recipe as common
from test_operator_recipe import RECIPES, VARIANT, main

BIN_DIR = None  # set by main()
# What the profile file held before (need not be valid): pretty-printed, so the diff shows lines.
OLD = '{\n  "name": "v",\n  "old": true\n}\n'


def apply_on_terminal(profile_dir, answer):
    """Runs apply with stdin, stdout and stderr on a pty; types `answer` at the [y/N] prompt.
    Returns (exit status, everything the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [os.path.join(BIN_DIR, "sparkglm"), "recipe", "apply", os.path.join(RECIPES, VARIANT),
         "--name", "v", "--profile-dir", profile_dir],
        stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    shown, answered = b"", False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            shown += chunk
        if not answered and b"[y/N] " in shown:
            os.write(master, answer)
            answered = True
        if proc.poll() is not None and not ready:
            break
    rc = proc.wait(timeout=60)
    os.close(master)
    return rc, shown.decode(errors="replace"), answered


class OverwriteTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "profiles")
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "v.json")
        with open(self.path, "w") as f:
            f.write(OLD)

    def tearDown(self):
        self.tmp.cleanup()

    def content(self):
        with open(self.path) as f:
            return f.read()

    def backups(self):
        return glob.glob(self.path + ".*.bak")

    def test_answer_no_changes_nothing(self):
        for answer in (b"n\r", b"\r", b"maybe\r"):
            rc, shown, answered = apply_on_terminal(self.dir, answer)
            self.assertTrue(answered, shown[-2000:])
            self.assertEqual(rc, 1, shown[-2000:])
            self.assertIn("--- " + self.path, shown)  # the diff was shown before the question
            self.assertIn('-  "old": true\r\n', shown)
            self.assertIn(' {\r\n', shown)  # unchanged lines are context
            self.assertIn("not overwritten", shown)
            self.assertEqual(self.content(), OLD)
            self.assertEqual(self.backups(), [])
            self.assertEqual(sorted(os.listdir(self.dir)), ["v.json"])

    def test_answer_yes_replaces_and_keeps_a_backup(self):
        rc, shown, answered = apply_on_terminal(self.dir, b"y\r")
        self.assertTrue(answered, shown[-2000:])
        self.assertEqual(rc, 0, shown[-2000:])
        self.assertIn('"provenance"', self.content())
        backups = self.backups()
        self.assertEqual(len(backups), 1, os.listdir(self.dir))
        with open(backups[0]) as f:
            self.assertEqual(f.read(), OLD)
        self.assertIn("the previous file is kept as " + backups[0], shown)

    def test_no_terminal_without_yes_refuses(self):
        rc, out, err = common.sparkglm("recipe", "apply", os.path.join(RECIPES, VARIANT), "--name",
                                       "v", "--profile-dir", self.dir)
        self.assertEqual(rc, 2, out + err)
        self.assertIn("there is no terminal to ask: pass --yes", err)
        self.assertIn("nothing was written", err)
        self.assertEqual(self.content(), OLD)
        self.assertEqual(self.backups(), [])

    def test_yes_without_terminal_overwrites_with_backup(self):
        rc, out, err = common.sparkglm("recipe", "apply", os.path.join(RECIPES, VARIANT), "--name",
                                       "v", "--profile-dir", self.dir, "--yes")
        self.assertEqual(rc, 0, err)
        self.assertIn('"provenance"', self.content())
        self.assertEqual(len(self.backups()), 1)

    def test_dry_run_over_an_existing_file_shows_the_diff_only(self):
        rc, out, err = common.sparkglm("recipe", "apply", os.path.join(RECIPES, VARIANT), "--name",
                                       "v", "--profile-dir", self.dir, "--dry-run")
        self.assertEqual(rc, 0, err)
        self.assertIn("+++ " + self.path + " (new)", out)
        self.assertEqual(self.content(), OLD)
        self.assertEqual(self.backups(), [])


if __name__ == "__main__":
    main(globals())

"""`sparkglm`'s offline commands refuse a flag they would ignore: --num-layers or --seed with a
--model checkpoint (it has its own depth and weights), --prefill-chunk on `logits` (one forward
over all tokens), and any flag a command accepts but did not use.

Run: python3 test_sparkglm_flags.py --bin-dir BUILD_DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest

BIN_DIR = None  # set by main()


def sparkglm(*args):
    out = subprocess.run([os.path.join(BIN_DIR, "sparkglm"), *args], capture_output=True,
                         text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


class FlagsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "x.npz")

    def tearDown(self):
        self.tmp.cleanup()

    def test_num_layers_and_seed_with_a_checkpoint_are_refused(self):
        # Refused before the directory is read: the directory need not exist.
        for flag in ("--num-layers", "--seed"):
            for cmd in (["logits", "--tokens", "1,2", "--out", self.out], ["generate"]):
                rc, _, err = sparkglm(*cmd, "--model", self.tmp.name, flag, "8")
                self.assertEqual(rc, 2, err)
                self.assertIn(flag + " applies to --preset only", err)
        self.assertFalse(os.path.exists(self.out))

    def test_logits_has_no_prefill_chunk(self):
        rc, _, err = sparkglm("logits", "--preset", "tinyglm-micro", "--tokens", "1,2",
                              "--out", self.out, "--prefill-chunk", "64")
        self.assertEqual(rc, 2, err)
        self.assertIn("unknown flag --prefill-chunk", err)

    def test_logits_with_a_preset_uses_num_layers(self):
        rc, out, err = sparkglm("logits", "--preset", "tinyglm-micro", "--num-layers", "4",
                                "--seed", "3", "--tokens", "1,2,3", "--out", self.out)
        self.assertEqual(rc, 0, err)
        self.assertIn("wrote " + self.out + " (3 positions)", out)


def main():
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    prog = unittest.main(argv=[sys.argv[0]] + rest, verbosity=2, exit=False)
    sys.exit(0 if prog.result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()

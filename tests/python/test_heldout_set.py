"""The committed held-out set is what tinyglm/train/heldout.py generates, and training cannot draw it.

1. heldout.heldout() with the defaults reproduces tinyglm/weights/tinyglm-micro-trained/heldout.json
   byte for byte (a change to the curriculum that moves the set must regenerate it, and then the
   quality reference in gates/G2.json with it).
2. Every task of the curriculum has examples; every reply ends with a stop token.
3. No held-out example equals a training row of the committed run's first 40 steps (the training
   draws use an integer seed, the held-out draws the key "heldout").

Run: python3 test_heldout_set.py --bin-dir BUILD_DIR (the build is not used)
"""
import argparse
import json
import os
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tinyglm", "train"))
import byte_chat as chat  # noqa: E402
import curriculum  # noqa: E402
import heldout  # noqa: E402

COMMITTED = os.path.join(ROOT, "tinyglm", "weights", "tinyglm-micro-trained", "heldout.json")
TRAINING = os.path.join(ROOT, "tinyglm", "weights", "tinyglm-micro-trained", "training.json")


class HeldoutSetTest(unittest.TestCase):
    def test_the_committed_file_is_the_generators_output(self):
        data = heldout.heldout()
        want = json.dumps(data, separators=(",", ":")) + "\n"
        with open(COMMITTED) as f:
            self.assertEqual(f.read(), want, "regenerate: python3 tinyglm/train/heldout.py --out ...")

    def test_every_task_is_scored_and_replies_end_with_a_stop_token(self):
        with open(COMMITTED) as f:
            data = json.load(f)
        tasks = {e["task"] for e in data["examples"]}
        self.assertEqual(tasks, {t for T in heldout.BUCKETS for t in curriculum.TASK_MIX[T]})
        for e in data["examples"]:
            self.assertIn(e["tokens"][-1], (chat.USER, chat.OBSERVATION))
            self.assertLess(0, e["reply_from"])
            self.assertLess(e["reply_from"], len(e["tokens"]))

    def test_no_example_is_a_training_row(self):
        with open(TRAINING) as f:
            seed = json.load(f)["seed"]
        with open(COMMITTED) as f:
            held = {tuple(e["tokens"]) for e in json.load(f)["examples"]}
        for step in range(40):
            tokens, weights = curriculum.batch(seed, step, 0.1, max_len=4096)
            for row, w in zip(tokens, weights):
                # weights[t] weighs predicting token t + 1; the padding's targets weigh 0
                padding = next(i for i, x in enumerate(reversed(w)) if x > 0)
                self.assertNotIn(tuple(row[:len(w) - padding + 1]), held)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    _, rest = parser.parse_known_args()
    prog = unittest.main(argv=[sys.argv[0]] + rest, verbosity=2, exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())

"""speculation_bench on the CPU with the trained tinyGLM, in JSON mode on the held-out JSON tasks
(--tasks json --json-mode): the file states its tasks and constraint, every k draws the same
greedy output as k = 0 at each concurrency, drafts under the grammar are accepted, and a --tasks
that selects nothing is refused naming the flag. --waves 2 measures a C1 cell over two prompts (more
tokens, another output, still the same for every k) and --waves 0 is refused. --outputs writes the
first cell's replies in example order: they hash to the cell's output_sha256, C1 over three waves
writes C3's replies, the examples no request took are empty, and an unwritable path is refused.

Run: python3 test_speculation_bench.py --bin-dir BUILD_DIR
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server_lifecycle as harness  # noqa: E402  (the shared --bin-dir main)

BIN_DIR = None
TRAINED = os.path.join(HERE, "..", "..", "tinyglm", "weights", "tinyglm-micro-trained")


def bench(*extra):
    return subprocess.run(
        [os.path.join(BIN_DIR, "bench", "speculation_bench"), "--model", TRAINED, "--prompts",
         os.path.join(TRAINED, "heldout.json"), "--threads", "2", *extra],
        capture_output=True, text=True, timeout=600)


class SpeculationBenchCells(unittest.TestCase):
    def test_json_mode_cells_keep_their_output_and_accept_drafts(self):
        proc = bench("--tasks", "json", "--json-mode", "--k", "0,2", "--concurrency", "1,2",
                     "--reps", "1", "--max-tokens", "24")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual(out["tasks"], ["json"])
        self.assertEqual(out["constraint"], "json_object")
        cells = out["cells"]
        self.assertEqual(len(cells), 4)
        for c in (1, 2):
            by_k = {cell["k"]: cell for cell in cells if cell["concurrency"] == c}
            self.assertEqual(by_k[2]["output_sha256"], by_k[0]["output_sha256"], f"C{c}")
            self.assertGreater(by_k[2]["acceptance_by_position"][0], 0, f"C{c}")
            self.assertGreater(by_k[2]["tokens_per_verify_step"], 1, f"C{c}")
            self.assertGreater(by_k[2]["prompt_drafts"], 0, f"C{c}")  # drafted in their step
            self.assertEqual(by_k[0]["prompt_drafts"], 0, f"C{c}")
        for cell in cells:  # what a client waits: first token, first gap, whole request
            self.assertGreater(cell["median_ttft_ms"], 0, cell)
            self.assertGreater(cell["median_first_gap_ms"], 0, cell)
            self.assertLess(cell["median_ttft_ms"], cell["median_request_ms"], cell)

    def test_waves_measure_more_prompts_per_cell(self):
        def cells(concurrency, waves):
            proc = bench("--k", "0,1", "--concurrency", concurrency, "--reps", "1", "--max-tokens",
                         "12", "--waves", str(waves))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            out = json.loads(proc.stdout)
            self.assertEqual(out["waves"], waves)
            return {(cell["concurrency"], cell["k"]): cell for cell in out["cells"]}
        one, two = cells("1,2", 1), cells("1", 2)
        for k in (0, 1):
            # C1 over two waves runs prompts 0 then 1: the tokens C2 draws for them at once (a
            # request's greedy output does not depend on its batch), not prompt 0 twice.
            self.assertEqual(two[(1, k)]["output_sha256"], one[(2, k)]["output_sha256"], f"k={k}")
            self.assertEqual(two[(1, k)]["completion_tokens"], one[(2, k)]["completion_tokens"])
            self.assertNotEqual(two[(1, k)]["output_sha256"], one[(1, k)]["output_sha256"], f"k={k}")
        proc = bench("--k", "0", "--reps", "1", "--waves", "0")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--waves", proc.stderr)

    def test_outputs_are_the_first_cells_replies_in_example_order(self):
        import hashlib
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            def replies(concurrency, waves):
                path = os.path.join(tmp, f"c{concurrency}w{waves}.json")
                proc = bench("--k", "0,1", "--concurrency", concurrency, "--reps", "1", "--max-tokens",
                             "12", "--waves", str(waves), "--outputs", path)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                with open(path) as f:
                    out = json.load(f)
                self.assertEqual(out["schema"], "sparkglm.bench_outputs/1")
                self.assertEqual((out["k"], out["concurrency"]), (0, int(concurrency)))
                first = json.loads(proc.stdout)["cells"][0]
                joined = "".join(f"{t}," for r in out["replies"] for t in r)
                self.assertEqual(hashlib.sha256(joined.encode()).hexdigest(), first["output_sha256"])
                return out["replies"]
            waves, once = replies("1", 3), replies("3", 1)
            self.assertEqual(waves, once)  # a request's greedy reply does not depend on its batch
            self.assertTrue(all(0 < len(r) <= 12 for r in waves[:3]), [len(r) for r in waves])
            self.assertTrue(all(r == [] for r in waves[3:]), "examples no request took")
            proc = bench("--k", "0", "--reps", "1", "--max-tokens", "4", "--outputs",
                         os.path.join(tmp, "no-such-dir", "r.json"))
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("--outputs", proc.stderr)

    def test_tasks_that_select_nothing_are_refused(self):
        proc = bench("--tasks", "no-such-task", "--k", "0", "--reps", "1")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("no example of --tasks", proc.stderr)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())

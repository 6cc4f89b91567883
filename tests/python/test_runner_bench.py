"""sparkglm-runner-bench on the CPU with tinyglm-micro: one decode cell and a short prefill are
measured with their floors, a prefill the --max-seconds budget cannot hold is recorded as skipped,
a decode cell under the 96-required-key schema times its masks beside the step (every pick inside
its mask, or the cell fails), and `sparkglm-qualify measure` turns the file into a bundle that
`verify` accepts and `report` renders.

Run: python3 test_runner_bench.py --bin-dir BUILD_DIR
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402  (the shared --bin-dir main)

BIN_DIR = None
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "schemas",
                      "96-required-keys.json")


class RunnerBench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="runner-bench-")
        cls.out = os.path.join(cls.tmp, "micro.json")
        bench = os.path.join(BIN_DIR, "bench", "sparkglm-runner-bench")
        cls.proc = subprocess.run(
            [bench, "--device", "cpu", "--preset", "tinyglm-micro", "--cells",
             "decode_c2,decode_c2_schema,prefill_256,prefill_256k", "--schema", SCHEMA,
             "--prompt", "24", "--decode-steps", "4", "--warmup-steps", "1",
             "--max-prefill-tokens", "64", "--max-seconds", "1", "--out", cls.out],
            capture_output=True, text=True, timeout=600)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def cells(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        with open(self.out) as f:
            doc = json.load(f)
        self.assertEqual(doc["schema"], "sparkglm.runner_bench/1")
        self.assertEqual((doc["device"], doc["preset"], doc["num_layers"]), ("cpu", "tinyglm-micro", 4))
        self.assertRegex(doc["binary_sha256"], "^[0-9a-f]{64}$")
        self.assertGreater(doc["bandwidth_gbps"], 0)
        self.assertGreater(doc["peak_tflops"], 0)
        return {c["cell"]: c for c in doc["cells"]}

    def test_decode_cell_times_each_step_of_its_rows(self):
        c = self.cells()["decode_c2"]
        self.assertEqual((c["rows"], c["runs"], len(c["samples_ms"])), (2, 4, 4))
        ordered = sorted(c["samples_ms"])
        self.assertAlmostEqual(c["median_ms"], (ordered[1] + ordered[2]) / 2, places=9)
        self.assertAlmostEqual(c["tokens_per_s"], 2 * 1e3 / c["median_ms"], places=6)
        parts = c["floor_parts"]
        self.assertEqual(c["floor_bytes"], parts["weights"] + parts["kda_state"] + parts["latent"])
        self.assertAlmostEqual(c["fraction_of_floor"], c["floor_ms"] / c["median_ms"], places=9)

    def test_schema_cell_times_its_masks_beside_the_step(self):
        c = self.cells()["decode_c2_schema"]
        self.assertNotIn("skipped", c)  # a pick outside its row's mask fails the cell
        self.assertEqual((c["rows"], c["runs"], len(c["mask_samples_us"])), (2, 4, 4))
        self.assertTrue(all(us > 0 for us in c["mask_samples_us"]))
        masks = sorted(c["mask_samples_us"])
        self.assertAlmostEqual(c["mask_us_per_token"], (masks[1] + masks[2]) / 2 / 2, places=6)
        self.assertGreater(c["mask_fraction_of_step"], 0)
        self.assertLess(c["mask_fraction_of_step"], 1)
        self.assertEqual(c["unconstrained"]["runs"], 4)
        self.assertGreater(c["grammar_bytes"], 0)
        self.assertGreater(c["vocabulary_bytes"], 0)
        with open(SCHEMA) as f:
            compact = json.dumps(json.load(f), sort_keys=True, separators=(",", ":"))
        self.assertEqual(c["schema_sha256"], hashlib.sha256(compact.encode()).hexdigest())

    def test_a_schema_cell_without_a_schema_is_refused(self):
        bench = os.path.join(BIN_DIR, "bench", "sparkglm-runner-bench")
        p = subprocess.run([bench, "--preset", "tinyglm-micro", "--cells", "decode_c1_schema",
                            "--out", os.path.join(self.tmp, "none.json")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2)
        self.assertIn("decode_c1_schema: a _schema cell needs --schema FILE", p.stderr)

    def test_prefill_cell_runs_three_cold_sequences(self):
        c = self.cells()["prefill_256"]
        self.assertEqual((c["tokens"], c["chunk_tokens"], c["runs"]), (256, 64, 3))
        self.assertAlmostEqual(c["tokens_per_s"], 256 * 1e3 / c["median_ms"], places=6)
        self.assertGreater(c["floor_flops"], 0)

    def test_a_cell_over_the_time_budget_is_skipped_with_the_reason(self):
        c = self.cells()["prefill_256k"]
        self.assertIn("--max-seconds 1", c["skipped"])
        self.assertNotIn("tokens_per_s", c)

    def test_measure_writes_a_bundle_that_verifies_and_renders(self):
        self.cells()
        bundle = os.path.join(self.tmp, "runner-micro")
        qualify = os.path.join(BIN_DIR, "sparkglm-qualify")
        # The engine targets live in the repository's gates/G2.json, whatever the working folder.
        gates = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gates")
        m = subprocess.run([qualify, "measure", "--runner-bench", self.out, "--title", "micro",
                            "--id", "runner-micro", "--out", bundle, "--gates", gates],
                           capture_output=True, text=True)
        # tinyglm-micro carries no targets: measured only, the gate not run.
        self.assertEqual(m.returncode, 0, m.stderr)
        self.assertIn("tinyglm-micro (cpu): measured only", m.stdout)
        v = subprocess.run([qualify, "verify", bundle], capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        r = subprocess.run([qualify, "report", bundle, "--out", os.path.join(self.tmp, "report")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("prefill_256k skipped", r.stdout)
        with open(os.path.join(bundle, "qualification.json")) as f:
            names = {(m["name"], m["case"]) for m in json.load(f)["metrics"]}
        for name in ("mask_us_per_token", "mask_fraction_of_step", "unconstrained_tokens_per_s",
                     "grammar_bytes"):
            self.assertIn((name, "decode_c2_schema"), names)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())

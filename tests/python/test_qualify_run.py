"""sparkglm-qualify end to end on tinyglm-micro: a G2 measurement and an A/B, each a bundle that
`verify` accepts; a flipped byte, an added file and a removed file are each caught; the report
renders; a bad flag is refused with a message naming it; a server started apart is measured
through --url.

Run: python3 test_qualify_run.py --bin-dir BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402  (the shared --bin-dir main)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN_DIR = None
TMP = None


def qualify(*args, timeout=600):
    return subprocess.run([os.path.join(BIN_DIR, "sparkglm-qualify")] + list(args), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def read_json(*path):
    with open(os.path.join(*path)) as f:
        return json.load(f)


def setUpModule():
    global TMP
    TMP = tempfile.mkdtemp(prefix="qualify-")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


class QualifyRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bundle = os.path.join(TMP, "g2-micro")
        cls.outcome = qualify("run", "--gate", "G2", "--preset", "tinyglm-micro", "--scale", "0.05",
                          "--id", "g2-micro", "--out", cls.bundle)

    def record(self):
        with open(os.path.join(self.bundle, "qualification.json")) as f:
            return json.load(f)

    def copy(self, name):
        dst = os.path.join(TMP, name)
        shutil.copytree(self.bundle, dst)
        return dst

    def test_measurement_passes_and_verifies(self):
        self.assertEqual(self.outcome.returncode, 0, self.outcome.stderr[-3000:])
        self.assertIn("verifies", self.outcome.stderr)
        self.assertIn("G2", self.outcome.stdout)
        v = qualify("verify", self.bundle)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)

    def test_record_holds_every_gate_and_the_raw_requests(self):
        r = self.record()
        self.assertEqual(r["level"], "G2")
        self.assertEqual(r["state"], "measurement")
        gates = {g["id"]: g for g in r["gates"]}
        self.assertEqual(gates["G0"]["status"], "pass")
        self.assertEqual(gates["G1"]["status"], "not-run")
        self.assertIn("GPU", gates["G1"]["summary"])
        self.assertEqual(gates["G2"]["status"], "pass", gates["G2"])
        self.assertIn("not applicable", gates["G2"]["summary"])
        self.assertEqual(r["change"]["candidate"]["model"]["preset"], "tinyglm-micro")
        self.assertEqual(len(r["change"]["candidate"]["binary_sha256"]), 64)
        paths = {a["path"] for a in r["artifacts"]}
        for p in ["requests.jsonl", "server/candidate/server.log", "server/candidate/identity.json",
                  "server/candidate/effective-config.json", "workloads/tinyglm-gate.json"]:
            self.assertIn(p, paths)
        with open(os.path.join(self.bundle, "requests.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        measured = [x for x in lines if x["repetition"] >= 0]
        warmups = [x for x in lines if x["repetition"] < 0]
        self.assertTrue(measured and warmups)
        self.assertTrue(all(x["ok"] for x in lines))
        # Every metric's samples can be recomputed from the raw arrays: TTFT of decode_c1.
        ttft = {}
        for x in measured:
            if x["workload"] == "tinyglm-gate" and x["case_id"] == "decode_c1":
                ttft[x["repetition"]] = x["first_output_s"] - x["start_s"]
        metric = [m for m in r["metrics"] if m["name"] == "ttft_s" and m["case"] == "decode_c1"
                  and m["workload"] == "tinyglm-gate"][0]
        self.assertEqual(len(metric["candidate"]["samples"]), len(ttft))
        for a, b in zip(metric["candidate"]["samples"], [ttft[k] for k in sorted(ttft)]):
            self.assertAlmostEqual(a, b, places=9)

    def test_tampering_is_caught(self):
        flipped = self.copy("flipped")
        path = os.path.join(flipped, "requests.jsonl")
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0x01
        open(path, "wb").write(bytes(data))
        v = qualify("verify", flipped)
        self.assertEqual(v.returncode, 1)
        self.assertIn("requests.jsonl", v.stdout + v.stderr)

        added = self.copy("added")
        open(os.path.join(added, "server", "extra.txt"), "w").write("x")
        v = qualify("verify", added)
        self.assertEqual(v.returncode, 1)
        self.assertIn("extra.txt", v.stdout + v.stderr)

        removed = self.copy("removed")
        os.remove(os.path.join(removed, "server", "candidate", "server.log"))
        v = qualify("verify", removed)
        self.assertEqual(v.returncode, 1)
        self.assertIn("server.log", v.stdout + v.stderr)

    def test_report_renders_outside_the_bundle(self):
        out = os.path.join(TMP, "report")
        rep = qualify("report", self.bundle, "--out", out)
        self.assertEqual(rep.returncode, 0, rep.stderr)
        for name in ["card.txt", "report.md", "report.html"]:
            self.assertTrue(os.path.getsize(os.path.join(out, name)) > 0, name)
        self.assertEqual(qualify("verify", self.bundle).returncode, 0)


class QualifyUrl(unittest.TestCase):
    """`run --url` measures a server it did not start: a sparkglm-serve this test starts itself,
    behind an API key. The bundle verifies, says the binary was not observed, and the server is
    still running afterwards (the harness never stops what it did not start)."""

    def test_running_server_is_measured_and_its_bundle_verifies(self):
        os.environ["QUALIFY_TEST_API_KEY"] = "k-qualify-url"
        with harness.ServerProcess("--api-key-env", "QUALIFY_TEST_API_KEY",
                                   bin_dir=BIN_DIR) as server:
            bundle = os.path.join(TMP, "url-micro")
            run = qualify("run", "--url", server.base, "--api-key-env", "QUALIFY_TEST_API_KEY",
                          "--gate", "G2", "--scale", "0.05", "--id", "url-micro", "--out", bundle)
            self.assertEqual(run.returncode, 0, run.stderr[-3000:])
            self.assertIsNone(server.proc.poll(), "the harness stopped a server it did not start")
            v = qualify("verify", bundle)
            self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
            r = read_json(bundle, "qualification.json")
            self.assertEqual(r["state"], "measurement")
            cand = r["change"]["candidate"]
            self.assertEqual(cand["observed"], "endpoint")
            self.assertEqual(cand["endpoint"], server.base)
            self.assertEqual(cand["model"]["preset"], "tinyglm-micro")
            self.assertTrue(any("not observed" in x for x in r["limitations"]), r["limitations"])
            endpoint = read_json(bundle, "server", "candidate", "endpoint.json")
            self.assertEqual(endpoint["models"]["data"][0]["id"], "tinyglm-micro")
            self.assertTrue(endpoint["models_headers"])
            for name in ("qualification.json", "requests.jsonl"):
                with open(os.path.join(bundle, name)) as f:
                    self.assertNotIn("k-qualify-url", f.read(), name)
            gates = {g["id"]: g for g in r["gates"]}
            self.assertEqual(gates["G2"]["status"], "pass", gates["G2"])
            # Token-keyed TTFT and the newer per-request fields are in every record.
            with open(os.path.join(bundle, "requests.jsonl")) as f:
                lines = [json.loads(x) for x in f]
            for x in lines:
                self.assertTrue(x["ok"], x["error"])
                self.assertEqual(sum(x["events_per_read"]), len(x["output_event_s"]))
                self.assertGreater(x["client_thread_cpu_s"], 0)
            names = {m["name"] for m in r["metrics"]}
            self.assertTrue({"output_throughput_tok_s", "ttft_s", "ttfv_s", "decode_tok_s"} <= names)
            self.assertNotIn("aggregate_decode_tok_s", names)
            self.assertIn("p99_events_per_read", r["client"]["delivery"])
            self.assertIsNotNone(r["client"]["thread_cpu_per_event_median_s"])
            # Two such bundles compare side by side.
            cmp = qualify("compare", bundle, bundle)
            self.assertEqual(cmp.returncode, 0, cmp.stdout + cmp.stderr)

    def test_process_flags_are_refused_with_url(self):
        for flag in (["--ab"], ["--preset", "tinyglm"], ["--server-args", "--threads 2"],
                     ["--checkpoint", "ckpt"]):
            run = qualify("run", "--url", "http://127.0.0.1:9", *flag,
                          "--out", os.path.join(TMP, "never-url"))
            self.assertEqual(run.returncode, 2, flag)
            self.assertIn(flag[0], run.stderr)
        run = qualify("run", "--model", "x", "--out", os.path.join(TMP, "never-url"))
        self.assertEqual(run.returncode, 2)
        self.assertIn("--model", run.stderr)


class QualifyAb(unittest.TestCase):
    def test_ab_of_two_equal_arms_compares_every_metric(self):
        bundle = os.path.join(TMP, "ab-micro")
        run = qualify("run", "--gate", "G2", "--preset", "tinyglm-micro", "--scale", "0.05",
                      "--ab", "--id", "ab-micro", "--out", bundle, "--repetitions", "3")
        self.assertIn(run.returncode, (0, 1), run.stderr[-3000:])
        r = json.load(open(os.path.join(bundle, "qualification.json")))
        self.assertIsNotNone(r["change"]["baseline"])
        g2 = [g for g in r["gates"] if g["id"] == "G2"][0]
        names = [c["name"] for c in g2["criteria"]]
        # The same binary on both arms: outputs equal bitwise, so this criterion must pass.
        ids = [c for c in g2["criteria"] if c["name"] == "token ids equal the baseline's"][0]
        self.assertTrue(ids["pass"], ids)
        self.assertTrue(any(n.startswith("median TTFT") for n in names))
        for m in r["metrics"]:
            self.assertIsNotNone(m["baseline"])
            self.assertIn(m["verdict"], ("better", "worse", "neutral-noisy"))
            if min(m["baseline"]["samples"]) > 0:
                self.assertIsNotNone(m["ci95"], m)
                self.assertEqual(len(m["ci95"]), 2, m)
            # else a resampled ratio to zero has no finite interval: null, never invented
        lines = [json.loads(line) for line in open(os.path.join(bundle, "requests.jsonl"))]
        self.assertEqual({x["arm"] for x in lines}, {"candidate", "baseline"})
        # Counters are deltas over the run, per arm: every request this arm sent, no more.
        for arm in ("candidate", "baseline"):
            sent = sum(1 for x in lines if x["arm"] == arm)
            served = sum(v for k, v in r["counters"][arm].items()
                         if k.startswith("sparkglm_requests_finished_total"))
            self.assertEqual(served, sent, (arm, r["counters"][arm]))
        self.assertEqual(qualify("verify", bundle).returncode, 0)

    def test_bad_flags_are_refused_naming_them(self):
        for args, text in [(["--gate", "G9"], "--gate"), (["--scale", "2"], "--scale"),
                           (["--option", "novalue"], "--option"), (["--bogus", "1"], "--bogus"),
                           (["--checkpoint", "d", "--preset", "tinyglm"], "--checkpoint")]:
            run = qualify("run", *args, "--out", os.path.join(TMP, "never"))
            self.assertEqual(run.returncode, 2, args)
            self.assertIn(text, run.stderr)
        self.assertFalse(os.path.exists(os.path.join(TMP, "never")))

    def test_arguments_that_are_not_utf8_are_refused_before_anything_is_written(self):
        # A bundle records its title, limitations and arguments as JSON text, which cannot hold
        # these bytes: they used to end the command after it had started writing its folder.
        bench = os.path.join(ROOT, "bench", "results", "h200-2026-12-05-s20", "rb3-tinyglm-bf16-off-1.json")
        bad = os.fsdecode(b"caf\xe9")
        for args in (["--title", bad, "--id", "u1"], ["--title", "t", "--limitation", bad, "--id", "u1"]):
            out = os.path.join(TMP, "not-utf8")
            run = qualify("measure", "--runner-bench", bench, *args, "--out", out)
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn("is not valid UTF-8", run.stderr)
            self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    harness.parse_args_and_run(globals())

"""`sparkglm recipe apply` against a local HTTP server that serves the recipe fixtures: both fixtures
become valid profiles with their unsupported flags, refused environment keys and provenance; bad
input (unreachable URL, HTTP error, non-JSON, huge body, no command, shell metacharacters, a name
outside the profile folder) is refused with a clear message and writes nothing. Also `sparkglm
profile list|show|diff|use`.

Also the helpers the other test_operator_*.py files import: RecipeServer and sparkglm().

Run: python3 test_operator_recipe.py --bin-dir BUILD_DIR
"""
import argparse
import hashlib
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest

BIN_DIR = None  # set by main()
HERE = os.path.dirname(os.path.abspath(__file__))
RECIPES = os.path.join(HERE, "..", "data", "recipes")
SEED = "glm-5-3-flash-nvfp4-on-2x-dgx-spark-atlas-rc4-2-tp2-dflash2-1m.json"
VARIANT = "variant-8x128k.json"
SEED_NAME = SEED[:-len(".json")]
VARIANT_NAME = "glm-5-3-flash-tp2-8x128k-variant"
PWNED = os.path.join(tempfile.gettempdir(), "sparkglm-recipe-pwned-%d" % os.getpid())

# Bodies served besides the fixture files: path -> (status, content type, body).
EXTRA = {
    "/page.html": (200, "text/html", b"<!doctype html><html><body>Recipe moved</body></html>"),
    "/missing.json": (404, "text/plain", b"no such recipe"),
    "/huge.json": (200, "application/json",
                   b'{"command": "serve", "pad": "' + b"x" * (3 << 20) + b'"}'),
    "/no-command.json": (200, "application/json",
                         json.dumps({"id": "no-command", "model": "GLM-5.3-Flash",
                                     "env": {"A": "1"}}).encode()),
    "/shell.json": (200, "application/json",
                    json.dumps({"id": "shell", "model": "GLM-5.3-Flash",
                                "command": "serve --max-num-seqs 2; touch " + PWNED}).encode()),
    "/subst.json": (200, "application/json",
                    json.dumps({"id": "subst", "model": "GLM-5.3-Flash",
                                "command": "serve --max-num-seqs $(touch " + PWNED + ")"}).encode()),
    "/bad-value.json": (200, "application/json",
                        json.dumps({"id": "bad-value", "model": "GLM-5.3-Flash",
                                    "command": "serve --kv-cache-dtype=fp4"}).encode()),
    "/escape.json": (200, "application/json",
                     json.dumps({"id": "../../escape", "model": "GLM-5.3-Flash",
                                 "command": "serve --max-num-seqs 2"}).encode()),
}


class RecipeServer:
    """http.server on a free loopback port: the fixtures under /recipes/, EXTRA, and redirects."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                redirects = {"/moved": "/recipes/" + VARIANT, "/loop": "/loop",
                             "/to-file": "file:///etc/passwd"}
                if self.path in redirects:
                    self.send_response(302)
                    self.send_header("Location", redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/huge-stream.json":
                    # No Content-Length: the size is known only while reading.
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    try:
                        self.wfile.write(b'{"pad": "')
                        for _ in range(48):
                            self.wfile.write(b"x" * 65536)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    self.close_connection = True
                    return
                if self.path.startswith("/recipes/"):
                    name = os.path.basename(self.path)
                    path = os.path.join(RECIPES, name)
                    if os.path.isfile(path):
                        with open(path, "rb") as f:
                            self.reply(200, "application/json", f.read())
                        return
                status, kind, body = EXTRA.get(self.path, (404, "text/plain", b"not found"))
                self.reply(status, kind, body)

            def reply(self, status, kind, body):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a body over its limit

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def sparkglm(*args, stdin=subprocess.DEVNULL, timeout=120):
    """Runs the sparkglm binary; returns (exit status, stdout, stderr)."""
    p = subprocess.run([os.path.join(BIN_DIR, "sparkglm")] + list(args), stdin=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def fixture_sha256(name):
    with open(os.path.join(RECIPES, name), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class RecipeApplyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = RecipeServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "profiles")
        os.makedirs(self.dir)

    def tearDown(self):
        self.tmp.cleanup()

    def apply(self, url, *extra):
        return sparkglm("recipe", "apply", url, "--profile-dir", self.dir,
                        "--state-dir", os.path.join(self.tmp.name, "state"), *extra)

    def load(self, name):
        with open(os.path.join(self.dir, name + ".json")) as f:
            return json.load(f)

    def assert_nothing_written(self):
        self.assertEqual(os.listdir(self.dir), [])

    def test_seed_recipe_becomes_a_profile_with_provenance(self):
        url = self.server.url + "/recipes/" + SEED
        rc, out, err = self.apply(url)
        self.assertEqual(rc, 0, err)
        p = self.load(SEED_NAME)
        self.assertEqual(p["model"], "glm-5.3-flash")
        self.assertEqual(p["limits"], {"max_seq_len": 1048576, "max_num_seqs": 4,
                                       "max_batch_size": 4, "max_prefill_tokens": 8192,
                                       "gpu_memory_utilization": 0.88})
        # --ssm-cache-slots / --ssm-checkpoint-interval are the prefix cache's snapshot options.
        self.assertEqual(p["options"], {"block-size": 16, "kv-cache-dtype": "fp8_g128",
                                        "enable-prefix-caching": True,
                                        "prefix-cache-snapshots": 16, "prefix-snapshot-every": 0})
        self.assertEqual(p["server_args"]["world-size"], 2)
        self.assertEqual(p["server_args"]["tp-size"], 2)
        prov = p["provenance"]
        self.assertEqual(prov["source"], url)
        self.assertEqual(prov["sha256"], fixture_sha256(SEED))
        self.assertRegex(prov["fetched_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(prov["recipe"]["model_revision"], "423acf37583782c51c142d145aef733d72943d93")
        flags = {u["flag"]: u["reason"] for u in prov["unsupported_flags"]}
        for flag in ("--ep-size=2", "--dflash", "--draft-model=/models/drafter", "--no-tui",
                     "--ssm-h-dtype=f32", "--mtp-gate=force"):
            self.assertIn(flag, flags)
            self.assertIn(flag, out)  # the report names it too
        self.assertIn("speculative decoding", flags["--dflash"])
        self.assertNotIn("--ssm-cache-slots=16", flags)  # applied as prefix-cache-snapshots
        self.assertEqual(len(prov["environment_notes"]), 49)
        self.assertEqual(prov["environment_notes"]["ATLAS_GLM_KDA_COMMIT_CTAS"], "96")
        self.assertIn("ATLAS_KV_NVME_GB=<half>: a placeholder, not a value",
                      prov["environment_skipped"])
        self.assertIn("environment text skipped", out)
        self.assertIn("wrote " + os.path.join(self.dir, SEED_NAME + ".json"), out)
        # The engine reads what the tool wrote.
        rc, _, err = sparkglm("profile", "show", SEED_NAME, "--profile-dir", self.dir)
        self.assertEqual(rc, 0, err)
        self.assertIn("valid, sha256", err)

    def test_variant_recipe_reports_unknown_flag_and_refuses_ld_preload(self):
        url = self.server.url + "/moved"  # through a redirect
        rc, out, err = self.apply(url)
        self.assertEqual(rc, 0, err)
        p = self.load(VARIANT_NAME)
        self.assertEqual(p["limits"]["max_num_seqs"], 8)
        self.assertEqual(p["limits"]["max_seq_len"], 131072)
        self.assertEqual(p["limits"]["gpu_memory_utilization"], 0.91)
        prov = p["provenance"]
        self.assertEqual(prov["source"], url)
        self.assertEqual(prov["sha256"], fixture_sha256(VARIANT))
        self.assertEqual(prov["unsupported_flags"],
                         [{"flag": "--some-future-flag=7",
                           "reason": "no SparkGLM option of this name"}])
        self.assertEqual([r["key"] for r in prov["refused_environment"]], ["LD_PRELOAD"])
        self.assertNotIn("LD_PRELOAD", prov["environment_notes"])
        self.assertEqual(prov["environment_notes"],
                         {"ATLAS_GLM_PC_EVICT": "1", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"})
        self.assertRegex(out, r"environment refused \(1\):\n  LD_PRELOAD=/tmp/evil.so: refused")
        self.assertIn("--some-future-flag=7: no SparkGLM option of this name", out)

    def test_local_file_and_dry_run(self):
        rc, out, err = self.apply(os.path.join(RECIPES, VARIANT), "--dry-run", "--name", "v")
        self.assertEqual(rc, 0, err)
        self.assertIn("dry run: nothing was written", out)
        self.assert_nothing_written()
        rc, out, err = self.apply(os.path.join(RECIPES, VARIANT), "--name", "v")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.load("v")["provenance"]["source"],
                         os.path.realpath(os.path.join(RECIPES, VARIANT)))

    def assert_refused(self, url, *needles, extra=()):
        rc, out, err = self.apply(url, *extra)
        self.assertNotEqual(rc, 0, out)
        for needle in needles:
            self.assertIn(needle, err)
        self.assert_nothing_written()
        return err

    def test_unreachable_url(self):
        self.assert_refused("http://127.0.0.1:1/recipe.json", "http://127.0.0.1:1/recipe.json")

    def test_http_error_status(self):
        self.assert_refused(self.server.url + "/missing.json", "HTTP status 404",
                            "no such recipe")

    def test_redirect_loops_and_other_schemes_are_refused(self):
        self.assert_refused(self.server.url + "/loop", self.server.url + "/loop", "redirect")
        self.assert_refused(self.server.url + "/to-file", self.server.url + "/to-file")

    def test_non_json_body(self):
        self.assert_refused(self.server.url + "/page.html", "not JSON", "text/html",
                            "<!doctype html>")

    def test_huge_body(self):
        self.assert_refused(self.server.url + "/huge.json", "larger than the limit of 1 MiB")
        self.assert_refused(self.server.url + "/huge-stream.json", "larger than the limit of 1 MiB")

    def test_deeply_nested_recipe_is_refused_by_name(self):
        # Issue 14: notes nested 100,000 deep (200 KB, well under the 1 MiB fetch limit) crashed
        # `recipe apply`, --dry-run included. Now a named error, and nothing written.
        with open(os.path.join(RECIPES, VARIANT)) as f:
            recipe = json.load(f)
        recipe["notes"] = None
        deep = "[" * 100000 + "]" * 100000
        path = os.path.join(self.tmp.name, "deep.json")
        with open(path, "w") as f:
            f.write(json.dumps(recipe).replace('"notes": null', '"notes": ' + deep))
        for extra in (("--dry-run",), ()):
            err = self.assert_refused(path, "JSON nested deeper than 32 levels",
                                      extra=extra + ("--name", "deep"))
            self.assertNotIn("Segmentation", err)

    def test_recipe_without_a_command(self):
        self.assert_refused(self.server.url + "/no-command.json", "no serve command",
                            "serve_command")

    def test_shell_metacharacters_are_refused_never_run(self):
        self.assert_refused(self.server.url + "/shell.json", "unquoted shell operator ';'")
        self.assert_refused(self.server.url + "/subst.json", "command substitution")
        self.assertFalse(os.path.exists(PWNED))

    def test_a_value_the_registry_rejects_writes_nothing(self):
        self.assert_refused(self.server.url + "/bad-value.json", "--kv-cache-dtype=fp4",
                            "expected one of bf16, fp8_g128")

    def test_a_name_outside_the_profile_folder(self):
        outside = os.path.join(self.tmp.name, "outside.json")
        self.assert_refused(self.server.url + "/recipes/" + VARIANT, "profile name",
                            extra=("--name", "../outside"))
        self.assertFalse(os.path.exists(outside))
        # A recipe id that climbs is reduced to a plain name inside the folder.
        rc, _, err = self.apply(self.server.url + "/escape.json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(os.listdir(self.dir), ["escape.json"])

    def test_profile_list_show_diff_use(self):
        for name, url in (("a", "/recipes/" + SEED), ("b", "/recipes/" + VARIANT)):
            rc, _, err = self.apply(self.server.url + url, "--name", name)
            self.assertEqual(rc, 0, err)
        common = ("--profile-dir", self.dir, "--state-dir", os.path.join(self.tmp.name, "state"))
        rc, out, err = sparkglm("profile", "use", "b", *common)
        self.assertEqual(rc, 0, err)
        rc, out, err = sparkglm("profile", "list", *common)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"  a\n      Imported from the recipe")
        self.assertIn("* b\n", out)
        rc, out, _ = sparkglm("profile", "diff", "a", "b", *common)
        self.assertEqual(rc, 1)
        self.assertIn('-    "max_num_seqs": 4,', out)
        self.assertIn('+    "max_num_seqs": 8,', out)
        rc, out, _ = sparkglm("profile", "diff", "a", "a", *common)
        self.assertEqual((rc, out), (0, "the profiles are identical\n"))
        rc, _, err = sparkglm("profile", "use", "nope", *common)
        self.assertNotEqual(rc, 0)
        self.assertIn("available: a, b", err)


def main(module_globals):
    """The common main(): --bin-dir, then unittest over the calling module."""
    global BIN_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    module_globals["BIN_DIR"] = BIN_DIR
    prog = unittest.main(module=module_globals["__name__"], argv=[sys.argv[0]] + rest,
                         verbosity=2, exit=False)
    sys.exit(0 if prog.result.wasSuccessful() else 1)


if __name__ == "__main__":
    main(globals())

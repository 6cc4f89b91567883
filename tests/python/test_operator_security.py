"""The operator tool against a hostile neighbour: a key given to `sparkglm start` is in no argv and
no state file, the state folder is 0700 and its files 0600, and the key can come from a file or a
variable the operator names; `status` reports the version of the running executable, not one a
client wrote into the log; `stop` signals only the process it started, not one that merely calls
itself sparkglm-serve; three concurrent `start` launch one server; twelve concurrent `recipe apply
--yes` keep every version they replace; a recipe's key never reaches the profile.

Run: python3 test_operator_security.py --bin-dir BUILD_DIR
"""
import json
import os
import signal
import stat
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import test_operator_recipe as common
from test_operator_engine import MICRO, alive
from test_operator_recipe import main

BIN_DIR = None  # set by main()
KEY = "sk-test-0123456789abcdef"


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def get(url, key=None):
    """HTTP status of GET url (with a bearer key when given)."""
    request = urllib.request.Request(url)
    if key:
        request.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def serve_pids(binary, marker):
    """Pids of live processes running `binary` whose argv mentions `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.path.realpath("/proc/%s/exe" % entry) != binary:
                continue
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                if marker.encode() in f.read() and alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            pass
    return found


class OperatorSecurityTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.profiles = os.path.join(self.tmp.name, "profiles")
        self.state = os.path.join(self.tmp.name, "state")
        os.makedirs(self.profiles)
        with open(os.path.join(self.profiles, "micro.json"), "w") as f:
            json.dump(MICRO, f, indent=2)
        self.serve = os.path.realpath(os.path.join(BIN_DIR, "sparkglm-serve"))
        self.extra = []  # processes a test started itself

    def tearDown(self):
        for pid in serve_pids(self.serve, self.profiles):
            os.kill(pid, signal.SIGKILL)
        for p in self.extra:
            p.kill()
            p.wait()
        self.tmp.cleanup()

    def tool(self, command, *args, env=None):
        flags = ["--state-dir", self.state]
        if command == "start":
            flags += ["--profile-dir", self.profiles, "--profile", "micro"]
        args = list(args)
        i = args.index("--") if "--" in args else len(args)
        argv = [os.path.join(BIN_DIR, "sparkglm"), command] + args[:i] + flags + args[i:]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300,
                           env=dict(os.environ, **(env or {})))
        return p.returncode, p.stdout, p.stderr

    def started(self, *args, env=None):
        rc, out, err = self.tool("start", *args, env=env)
        self.assertEqual(rc, 0, out + err)
        with open(os.path.join(self.state, "engine.json")) as f:
            record = json.load(f)
        self.assertTrue(record["url"].startswith("http://127.0.0.1:"), record)
        return record

    def assert_state_is_private_and_keyless(self):
        self.assertEqual(mode(self.state), 0o700)
        for name in os.listdir(self.state):
            path = os.path.join(self.state, name)
            self.assertEqual(mode(path), 0o600, name)
            with open(path, "rb") as f:
                self.assertNotIn(KEY.encode(), f.read(), name)

    def test_an_inline_key_reaches_the_server_but_no_argv_or_state_file(self):
        record = self.started("--", "--api-key", KEY)
        self.assert_state_is_private_and_keyless()
        with open("/proc/%d/cmdline" % record["pid"], "rb") as f:
            self.assertNotIn(KEY.encode(), f.read())
        self.assertEqual(get(record["url"] + "/v1/models"), 401)
        self.assertEqual(get(record["url"] + "/v1/models", KEY), 200)
        rc, out, err = self.tool("stop")
        self.assertEqual(rc, 0, out + err)

    def test_the_key_comes_from_a_file_or_a_named_variable(self):
        key_file = os.path.join(self.tmp.name, "key")
        with open(key_file, "w") as f:
            f.write(KEY + "\n")
        os.chmod(key_file, 0o600)
        record = self.started("--api-key-file", key_file)
        self.assertIn(os.path.abspath(key_file), record["args"])
        self.assertEqual(get(record["url"] + "/v1/models"), 401)
        self.assertEqual(get(record["url"] + "/v1/models", KEY), 200)
        self.assert_state_is_private_and_keyless()
        rc, out, err = self.tool("status")
        self.assertIn("health: ok", out)
        self.assertRegex(out, r"pool: 0 of \d+ KV blocks")  # status sends the key to /metrics
        self.assertEqual(self.tool("stop")[0], 0)

        record = self.started("--api-key-env", "MY_SERVE_KEY", env={"MY_SERVE_KEY": KEY})
        self.assertEqual(get(record["url"] + "/v1/models"), 401)
        self.assertEqual(get(record["url"] + "/v1/models", KEY), 200)
        self.assert_state_is_private_and_keyless()
        self.assertEqual(self.tool("stop")[0], 0)

        # A missing source is named before any process starts.
        rc, out, err = self.tool("start", "--api-key-env", "SPARKGLM_NO_SUCH_VAR")
        self.assertNotEqual(rc, 0)
        self.assertIn("--api-key-env SPARKGLM_NO_SUCH_VAR: the variable is not set", err)
        self.assertEqual(serve_pids(self.serve, self.profiles), [])

    def test_status_reports_the_executables_version_not_a_forged_log_line(self):
        record = self.started()
        forged = "sparkglm-serve 6.6.6-forged (commit evil)"
        body = json.dumps({"model": "tinyglm-micro", "prompt": "hi", "max_tokens": 1,
                           "cache_salt": "x\n2026-01-01T00:00:00.000Z " + forged + "\n"}).encode()
        request = urllib.request.Request(record["url"] + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=60).read()
        except urllib.error.HTTPError:
            pass  # refused or not: what matters is what status reads
        # Even a line that made it into the log whole is not believed.
        with open(os.path.join(self.state, "engine.log"), "a") as f:
            f.write("2026-01-01T00:00:00.000Z " + forged + "\n")
        version = subprocess.run([self.serve, "--version"], stdout=subprocess.PIPE, text=True,
                                 check=True).stdout.splitlines()
        commit = [l[len("commit: "):] for l in version if l.startswith("commit: ")][0]
        rc, out, err = self.tool("status")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("version: %s (commit %s)\n" % (version[0], commit), out)
        self.assertIn("binary: " + self.serve, out)
        self.assertNotIn("6.6.6", out)
        self.assertEqual(self.tool("stop")[0], 0)

    def test_stop_refuses_a_process_that_merely_has_the_name(self):
        impostor = subprocess.Popen(["bash", "-c", "exec -a sparkglm-serve sleep 300"])
        self.extra.append(impostor)
        deadline = time.time() + 10
        while time.time() < deadline:
            with open("/proc/%d/cmdline" % impostor.pid, "rb") as f:
                if f.read().startswith(b"sparkglm-serve\0"):
                    break
            time.sleep(0.05)
        with open("/proc/%d/stat" % impostor.pid) as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        os.makedirs(self.state, mode=0o700)
        with open(os.path.join(self.state, "engine.pid"), "w") as f:
            f.write("%d\n" % impostor.pid)
        with open(os.path.join(self.state, "engine.json"), "w") as f:
            json.dump({"pid": impostor.pid, "start_ticks": start_ticks,
                       "executable": self.serve}, f)
        rc, out, err = self.tool("stop", "--force", "--timeout", "1")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("is not the sparkglm-serve started here", out)
        self.assertIn("the engine is not running", out)
        time.sleep(0.2)
        self.assertIsNone(impostor.poll(), "stop signalled a process it did not start")

    def test_three_concurrent_starts_launch_one_server(self):
        argv = [os.path.join(BIN_DIR, "sparkglm"), "start", "--profile", "micro",
                "--profile-dir", self.profiles, "--state-dir", self.state]
        runs = [subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(3)]
        results = [(p.wait(timeout=300),) + p.communicate() for p in runs]
        started = [r for r in results if r[0] == 0]
        self.assertEqual(len(started), 1, results)
        for rc, out, err in results:
            if rc != 0:
                self.assertIn("the engine is already running", err)
        self.assertEqual(len(serve_pids(self.serve, self.profiles)), 1)
        self.assertEqual(self.tool("stop")[0], 0)
        self.assertEqual(serve_pids(self.serve, self.profiles), [])


class RecipeSecurityTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "profiles")
        self.state = os.path.join(self.tmp.name, "state")

    def tearDown(self):
        self.tmp.cleanup()

    def recipe(self, name, command):
        path = os.path.join(self.tmp.name, name + ".json")
        with open(path, "w") as f:
            json.dump({"id": "shared", "model": "GLM-5.3-Flash", "command": command}, f)
        return path

    def apply_argv(self, path):
        return [os.path.join(BIN_DIR, "sparkglm"), "recipe", "apply", path, "--yes",
                "--profile-dir", self.dir, "--state-dir", self.state]

    def test_a_recipe_key_is_redacted_in_the_profile(self):
        path = self.recipe("keyed", "vllm serve zai/GLM-5.3-Flash --api-key=sk-SECRET1 "
                                    "--hf-token sk-SECRET2 --max-num-seqs 2")
        p = subprocess.run(self.apply_argv(path), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("SECRET", p.stdout + p.stderr)
        with open(os.path.join(self.dir, "shared.json")) as f:
            text = f.read()
        self.assertNotIn("SECRET", text)
        command = json.loads(text)["provenance"]["recipe"]["command"]
        self.assertIn("--api-key=<redacted>", command)
        self.assertEqual(command[command.index("--hf-token") + 1], "<redacted>")

    def test_twelve_concurrent_applies_keep_every_version(self):
        first = self.recipe("v0", "serve --max-num-seqs 100")
        subprocess.run(self.apply_argv(first), stdin=subprocess.DEVNULL, capture_output=True,
                       check=True, timeout=120)
        paths = [self.recipe("v%d" % i, "serve --max-num-seqs %d" % i) for i in range(1, 13)]
        runs = [subprocess.Popen(self.apply_argv(p), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for p in paths]
        for p in runs:
            out, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, out + err)
        names = os.listdir(self.dir)
        backups = [n for n in names if n.endswith(".bak")]
        self.assertEqual(len(backups), 12, names)
        seqs = set()
        for n in names:
            with open(os.path.join(self.dir, n)) as f:
                seqs.add(json.load(f)["limits"]["max_num_seqs"])
        self.assertEqual(seqs, {100} | set(range(1, 13)))


if __name__ == "__main__":
    main(globals())

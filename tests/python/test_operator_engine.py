"""`sparkglm start|status|logs|stop` against a real sparkglm-serve on tinyglm-micro: start waits for
/health and says where it listens; status shows the version, profile, pid, health and pool use;
a second start says it is already running; stop ends the process; and the clear messages for an
engine that is not running, a port another process holds, and a server that exits at start.

Run: python3 test_operator_engine.py --bin-dir BUILD_DIR
"""
import json
import os
import re
import signal
import socket
import tempfile
import time
import unittest
import urllib.request

import test_operator_recipe as common
from test_operator_recipe import main

BIN_DIR = None  # set by main()

MICRO = {
    "name": "micro",
    "description": "tinyglm-micro on the CPU, for the operator tests",
    "model": "tinyglm-micro",
    "precision_mode": "strict",
    "limits": {"max_num_seqs": 4, "max_seq_len": 32768, "max_prefill_tokens": 256,
               "kv_cache_memory_bytes": "24MiB"},
    "server_args": {"device": "cpu", "threads": 2, "bind": "127.0.0.1", "port": 0},
}


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


class EngineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.profiles = os.path.join(self.tmp.name, "profiles")
        self.state = os.path.join(self.tmp.name, "state")
        os.makedirs(self.profiles)
        with open(os.path.join(self.profiles, "micro.json"), "w") as f:
            json.dump(MICRO, f, indent=2)

    def tearDown(self):
        # Never leave a server behind, whatever the test did.
        try:
            with open(os.path.join(self.state, "engine.pid")) as f:
                pid = int(f.read())
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            pass
        self.tmp.cleanup()

    def run_tool(self, *args):
        flags = ("--state-dir", self.state)
        if args[0] == "start":
            flags += ("--profile-dir", self.profiles)
        rest = list(args[1:])
        if "--" in rest:  # the tool's own flags go before `--`
            i = rest.index("--")
            rest = rest[:i] + list(flags) + rest[i:]
        else:
            rest += list(flags)
        return common.sparkglm(args[0], *rest, timeout=300)

    def test_start_status_logs_stop(self):
        rc, out, err = self.run_tool("start", "--profile", "micro")
        self.assertEqual(rc, 0, out + err)
        m = re.search(r"pid (\d+), listening on (http://127\.0\.0\.1:\d+)", out)
        self.assertIsNotNone(m, out)
        pid, url = int(m.group(1)), m.group(2)
        self.assertIn("profile micro", out)
        with urllib.request.urlopen(url + "/health", timeout=10) as r:
            self.assertEqual(r.status, 200)

        rc, out, err = self.run_tool("status")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("engine: running, pid %d" % pid, out)
        self.assertRegex(out, r"version: sparkglm-serve \S+ \(")
        self.assertIn("profile: micro (" + os.path.join(self.profiles, "micro.json"), out)
        self.assertIn("listening: " + url, out)
        self.assertIn("health: ok", out)
        self.assertRegex(out, r"pool: 0 of \d+ KV blocks in use \(0\.0%\); requests running 0")

        rc, out, err = self.run_tool("start", "--profile", "micro")
        self.assertNotEqual(rc, 0)
        self.assertIn("already running (pid %d, %s)" % (pid, url), err)

        rc, out, err = self.run_tool("logs", "--lines", "0")
        self.assertEqual(rc, 0, err)
        self.assertIn("listening on " + url, out)

        rc, out, err = self.run_tool("stop")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("stopped", out)
        self.assertFalse(alive(pid))
        self.assertFalse(os.path.exists(os.path.join(self.state, "engine.pid")))

        rc, out, _ = self.run_tool("status")
        self.assertEqual(rc, 3, out)
        self.assertIn("engine: not running", out)
        rc, out, _ = self.run_tool("stop")
        self.assertEqual(rc, 0, out)
        self.assertIn("the engine is not running", out)

    def test_profile_use_is_the_default_for_start(self):
        rc, out, err = self.run_tool("start")
        self.assertNotEqual(rc, 0)
        self.assertIn("no profile: pass --profile NAME", err)
        rc, _, err = common.sparkglm("profile", "use", "micro", "--profile-dir", self.profiles,
                                     "--state-dir", self.state)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.run_tool("start")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("profile micro", out)
        rc, out, err = self.run_tool("stop")
        self.assertEqual(rc, 0, out + err)

    def test_a_taken_port_is_named_and_nothing_starts(self):
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        try:
            rc, out, err = self.run_tool("start", "--profile", "micro", "--port", str(port))
            self.assertNotEqual(rc, 0)
            self.assertIn("port %d on 127.0.0.1 is taken by another process" % port, err)
            self.assertFalse(os.path.exists(os.path.join(self.state, "engine.pid")))
        finally:
            holder.close()

    def test_a_server_that_exits_at_start_is_reported_with_its_log(self):
        rc, out, err = self.run_tool("start", "--profile", "micro", "--", "--device", "cuda")
        self.assertNotEqual(rc, 0)
        self.assertIn("sparkglm-serve exited with status 2 before it was healthy", err)
        # The server's own words, from its log: a build without CUDA, a machine without a GPU, or
        # a GPU and the micro preset, whose shapes the CUDA kernels do not serve.
        self.assertRegex(err, "without the CUDA backend|no CUDA device is visible|"
                              "the CUDA backend needs hidden_size")
        self.assertFalse(os.path.exists(os.path.join(self.state, "engine.pid")))

    def test_bad_serve_flags_are_refused_before_any_process(self):
        rc, out, err = self.run_tool("start", "--profile", "micro", "--", "--max-num-seqs", "0")
        self.assertNotEqual(rc, 0)
        self.assertIn("--max-num-seqs", err)
        self.assertFalse(os.path.exists(os.path.join(self.state, "engine.log")))

    def test_a_stale_pid_file_is_removed_not_obeyed(self):
        os.makedirs(self.state)
        with open(os.path.join(self.state, "engine.pid"), "w") as f:
            f.write("%d\n" % os.getpid())  # alive, but not sparkglm-serve
        rc, out, _ = self.run_tool("status")
        self.assertEqual(rc, 3, out)
        self.assertIn("stale pid file", out)
        self.assertFalse(os.path.exists(os.path.join(self.state, "engine.pid")))


if __name__ == "__main__":
    main(globals())

"""A device fault stops sparkglm-serve: requests in flight end with 503 device_fault (a stream with an
error event, then [DONE]), /health answers 503 with the reason and /metrics shows it while the
server drains, and the process exits with status 3 so that a supervisor restarts it.

The fault is the CPU backend's test hook (--inject-device-fault-after-steps: an Error of kind
kDeviceFatal in place of a step); tests/cuda/device_fault_cuda_test.cpp provokes a real illegal
address on a GPU.

Run: python3 test_server_device_fault.py --bin-dir BUILD_DIR
"""
import json
import threading
import unittest

from test_server_lifecycle import (ServerProcess, call, open_stream, parse_args_and_run,
                                   sse_events)

STEPS = 40  # well into decoding: the stream has sent tokens before the fault


def read_stream(sock):
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if b"data: [DONE]" in data:
            break
    sock.close()
    return sse_events(data.decode(errors="replace").splitlines())


class DeviceFaultTest(unittest.TestCase):
    def test_a_device_fault_ends_requests_with_503_and_the_server_exits_3(self):
        with ServerProcess("--inject-device-fault-after-steps", str(STEPS)) as srv:
            # A plain request alongside the stream: it gets the 503 as one body.
            plain = {}

            def body_request():
                plain["status"], _, plain["body"] = call(
                    srv.port, "POST", "/v1/completions",
                    {"prompt": "hi", "max_tokens": 5000, "temperature": 0, "ignore_eos": True})

            sock, head = open_stream(srv.port, {"prompt": "tell me", "max_tokens": 5000,
                                                "temperature": 0, "ignore_eos": True,
                                                "stream": True})
            t = threading.Thread(target=body_request)
            t.start()
            self.assertIn(b" 200 ", head.split(b"\r\n", 1)[0])
            events = read_stream(sock)
            t.join(60)

            # Tokens, then one error event, then [DONE].
            self.assertEqual(events[-1], "[DONE]", events[-3:])
            error = events[-2]["error"]
            self.assertEqual(error["code"], "device_fault", error)
            self.assertIn("--inject-device-fault-after-steps", error["message"])
            self.assertTrue(any("choices" in e for e in events[:-2]), "no token before the fault")

            self.assertEqual(plain["status"], 503, plain)
            self.assertEqual(json.loads(plain["body"])["error"]["code"], "device_fault")

            # While the server drains, /health and /metrics say why.
            status, _, body = call(srv.port, "GET", "/health", timeout=5)
            self.assertEqual(status, 503, body)
            reason = json.loads(body)["error"]
            self.assertEqual(reason["code"], "device_fault")
            self.assertIn("injected device fault", reason["message"])
            status, _, metrics = call(srv.port, "GET", "/metrics", timeout=5)
            self.assertIn("\nsparkglm_engine_fatal 1\n", metrics.decode())

            # Then it exits non-zero on its own, for a supervisor to restart it.
            self.assertEqual(srv.proc.wait(30), 3, srv.log())
            self.assertIn("engine fatal:", srv.log())

    def test_a_healthy_server_reports_no_fault(self):
        with ServerProcess() as srv:
            status, _, body = call(srv.port, "GET", "/health")
            self.assertEqual(status, 200, body)
            _, _, metrics = call(srv.port, "GET", "/metrics")
            self.assertIn("\nsparkglm_engine_fatal 0\n", metrics.decode())


if __name__ == "__main__":
    parse_args_and_run(globals())

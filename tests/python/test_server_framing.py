"""sparkglm-serve's HTTP framing and connection edges, on raw sockets: a body framing other than one
Content-Length or "Transfer-Encoding: chunked" alone is a 400 (RFC 9112 section 6: never guessed
at), a client that closes with tens of KiB of unread pipelined bytes is noticed while its request
runs, and a client that half-closes after sending (shutdown(SHUT_WR)) still gets its answer.

Run: python3 test_server_framing.py --bin-dir BUILD_DIR
"""
import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

SERVER = None
BODY = json.dumps({"prompt": "hi", "max_tokens": 4}).encode()


def setUpModule():
    global SERVER
    SERVER = harness.ServerProcess()


def tearDownModule():
    if SERVER is not None:
        code = SERVER.stop()
        assert code == 0, f"exit code {code}\n{SERVER.log()}"


def exchange(raw, half_close=False, timeout=30):
    """Sends `raw`, reads until the server closes; returns everything received."""
    s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=timeout)
    try:
        s.sendall(raw)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk
    finally:
        s.close()


def strip_interim(data):
    """The response without interim 1xx responses before it."""
    while data.startswith(b"HTTP/1.1 1"):
        data = data[data.index(b"\r\n\r\n") + 4:]
    return data


def dechunk(body):
    out = b""
    while True:
        size_line, rest = body.split(b"\r\n", 1)
        n = int(size_line, 16)
        if n == 0:
            return out
        out += rest[:n]
        body = rest[n + 2:]


def completion(headers, body=BODY):
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + headers + b"\r\n" + body)


class FramingTest(unittest.TestCase):
    def expect_400(self, raw, mention):
        data = exchange(raw)
        self.assertTrue(data.startswith(b"HTTP/1.1 400"), data[:200])
        self.assertIn(b"Connection: close", data)
        message = json.loads(data.split(b"\r\n\r\n", 1)[1])["error"]["message"]
        self.assertIn(mention, message)

    def test_ambiguous_framings_are_400(self):
        n = str(len(BODY)).encode()
        cases = [
            (b"Transfer-Encoding: identity\r\nContent-Length: " + n + b"\r\n", "both"),
            (b"Content-Length: " + n + b"\r\nTransfer-Encoding: identity\r\n", "malformed"),
            (b"Transfer-Encoding: xchunked\r\n", "not supported"),
            (b"Transfer-Encoding: chunked, identity\r\n", "not supported"),
            (b"Transfer-Encoding: gzip\r\n", "not supported"),
            (b"Content-Length: " + n + b"\r\nContent-Length: " + n + b"\r\n", "more than once"),
            (b"Content-Length: " + n + b", " + n + b"\r\n", "not one decimal number"),
            (b"Content-Length: " + n + b"\r\nContent-Length: 3\r\n", "malformed"),
        ]
        for headers, mention in cases:
            with self.subTest(headers=headers):
                self.expect_400(completion(headers), mention)
        # Chunked on HTTP/1.0 is refused too.
        self.expect_400(b"POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + b"%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n", "HTTP/1.0")

    def test_accepted_framings_are_served(self):
        for headers, body in [
            (b"Content-Length: %d\r\nConnection: close\r\n" % len(BODY), BODY),
            (b"Transfer-Encoding: chunked\r\nConnection: close\r\n",
             b"%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n"),
        ]:
            data = exchange(completion(headers, body))
            self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:300])
            self.assertIn(b'"choices"', data)


class ConnectionEdgeTest(unittest.TestCase):
    def test_close_with_unread_pipelined_bytes_cancels_the_request(self):
        body = json.dumps({"prompt": "a long answer", "max_tokens": 30000, "temperature": 0,
                           "ignore_eos": True}).encode()
        pipelined = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 2600  # about 85 KiB
        self.assertGreater(len(pipelined), 80 << 10)
        s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=10)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 1), 1)
        s.sendall(pipelined)
        time.sleep(0.3)  # the server has read what it will buffer
        t0 = time.time()
        s.close()
        # Noticed while the request runs (it would take many seconds), not when it ends.
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 0,
                                             timeout=3), 0, SERVER.log()[-2000:])
        self.assertLess(time.time() - t0, 3)
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_kv_blocks_used", 0), 0)

    def test_half_closed_client_gets_its_answer(self):
        raw = completion(b"Content-Length: %d\r\n" % len(BODY))
        data = strip_interim(exchange(raw, half_close=True))
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:300])
        body = data.split(b"\r\n\r\n", 1)[1]
        self.assertEqual(len(json.loads(body)["choices"]), 1)

    def test_half_closed_client_gets_its_whole_stream(self):
        body = json.dumps({"prompt": "hi", "max_tokens": 40, "stream": True,
                           "ignore_eos": True}).encode()
        data = strip_interim(exchange(completion(b"Content-Length: %d\r\n" % len(body), body),
                                      half_close=True))
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:300])
        events = harness.sse_events(dechunk(data.split(b"\r\n\r\n", 1)[1]).decode().splitlines())
        self.assertEqual(events[-1], "[DONE]")
        text = "".join(c["text"] for e in events[:-1] for c in e.get("choices", []))
        self.assertGreater(len(text), 0, events)

    def test_half_closed_pipelined_requests_are_all_answered(self):
        one = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        data = exchange(one * 3, half_close=True)
        self.assertEqual(data.count(b"HTTP/1.1 200"), 3, data)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())

"""sparkglm-serve under concurrency and misbehaving clients: 64 greedy requests of mixed lengths over
8 keep-alive connections equal their single-request outputs, the KV pool is back to empty
afterwards, a client that disconnects mid-stream is cancelled at once, and slow-loris clients
(headers dribbled a byte at a time) neither hold a thread nor block anyone else.

Run: python3 test_server_concurrency.py --bin-dir BUILD_DIR
"""
import http.client
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

SERVER = None


def setUpModule():
    global SERVER
    # Two I/O threads serve everything; a short header timeout bounds slow-loris clients.
    SERVER = harness.ServerProcess("--header-timeout", "1.5", "--idle-timeout", "2")


def tearDownModule():
    if SERVER is not None:
        code = SERVER.stop()
        assert code == 0, f"exit code {code}\n{SERVER.log()}"


def workload():
    """16 distinct (prompt, max_tokens) pairs, prompts 5..600 tokens, outputs 3..80 tokens."""
    cases = []
    for i in range(16):
        words = ["spark", "ember", "arc", "flare", "glow", "volt", "flash", "fuse"]
        prompt = " ".join(words[(i + k) % len(words)] for k in range(1 + (i * 37) % 100))
        cases.append({"prompt": prompt[: 5 + (i * 97) % 600], "max_tokens": 3 + (i * 29) % 78})
    return cases


def greedy_body(case):
    return {"model": "tinyglm-micro", "prompt": case["prompt"], "max_tokens": case["max_tokens"],
            "temperature": 0, "ignore_eos": True, "return_token_ids": True}


class ConcurrencyTest(unittest.TestCase):
    def test_64_requests_over_8_connections_match_single_requests(self):
        cases = workload()
        single = []
        for case in cases:  # one at a time: the reference
            status, body = harness.post_json(SERVER.port, "/v1/completions", greedy_body(case))
            self.assertEqual(status, 200, body)
            single.append(body["choices"][0]["token_ids"])
            self.assertEqual(len(single[-1]), case["max_tokens"])
        # The engine publishes its counters at the end of the step that answered.
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_kv_blocks_used", 0), 0)

        jobs = [i % len(cases) for i in range(64)]
        results = [None] * 64
        errors = []

        def connection(worker):
            conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=120)
            try:
                for j in range(worker, 64, 8):  # 8 requests on one keep-alive connection
                    status, _, data = harness.call(SERVER.port, "POST", "/v1/completions",
                                                   greedy_body(cases[jobs[j]]), conn=conn)
                    body = json.loads(data)
                    if status != 200:
                        errors.append((j, status, body))
                        continue
                    results[j] = body
            except Exception as e:  # noqa: BLE001 - reported below with the request
                errors.append((worker, "exception", repr(e)))
            finally:
                conn.close()

        threads = [threading.Thread(target=connection, args=(w,)) for w in range(8)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        self.assertEqual(errors, [])
        for j, body in enumerate(results):
            self.assertIsNotNone(body, f"request {j} has no answer")
            got = body["choices"][0]["token_ids"]
            self.assertEqual(got, single[jobs[j]], f"request {j} (case {jobs[j]}) differs")
            self.assertEqual(body["usage"]["completion_tokens"], cases[jobs[j]]["max_tokens"])
        elapsed = time.time() - t0
        self.assertLess(elapsed, 120)
        # Everything finished: no blocks held, nothing running or queued.
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_kv_blocks_used", 0), 0)
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 0), 0)
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_waiting", 0), 0)

    def test_disconnect_mid_stream_cancels_and_server_keeps_serving(self):
        before = finished_count("abort")
        s, head = harness.open_stream(SERVER.port, harness.LONG_STREAM)
        self.assertIn(b"200 OK", head)
        got = head
        while got.count(b"data: ") < 5:  # a few tokens have streamed
            got += s.recv(4096)
        self.assertEqual(harness.metric(SERVER.port, "sparkglm_num_requests_running"), 1)
        s.close()
        # The engine request is cancelled at once: its blocks and slot come back.
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 0,
                                             timeout=3), 0)
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_kv_blocks_used", 0), 0)
        self.assertEqual(finished_count("abort"), before + 1)
        status, body = harness.post_json(SERVER.port, "/v1/completions",
                                         {"prompt": "still there?", "max_tokens": 4})
        self.assertEqual(status, 200, body)

    def test_disconnect_while_blocking_request_runs_cancels_it(self):
        body = json.dumps({"prompt": "a long answer", "max_tokens": 30000, "temperature": 0,
                           "ignore_eos": True}).encode()
        s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=10)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 1), 1)
        s.close()
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_num_requests_running", 0,
                                             timeout=3), 0)
        self.assertEqual(harness.wait_metric(SERVER.port, "sparkglm_kv_blocks_used", 0), 0)

    def test_slow_loris_does_not_block_others(self):
        header = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 20\r\n\r\n")
        stop = threading.Event()
        closed_after = []

        def loris():
            s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=10)
            t0 = time.time()
            try:
                for b in header:
                    if stop.is_set():
                        break
                    s.sendall(bytes([b]))
                    time.sleep(0.1)
                    s.setblocking(False)
                    try:
                        if s.recv(1) == b"":
                            break  # the server closed the connection
                    except BlockingIOError:
                        pass
                    finally:
                        s.setblocking(True)
            except OSError:
                pass  # reset by the server
            closed_after.append(time.time() - t0)
            s.close()

        lorises = [threading.Thread(target=loris) for _ in range(12)]
        for t in lorises:
            t.start()
        time.sleep(0.3)
        # Meanwhile, ordinary requests are answered promptly.
        for i in range(5):
            t0 = time.time()
            status, body = harness.post_json(SERVER.port, "/v1/completions",
                                             {"prompt": f"hello {i}", "max_tokens": 8,
                                              "temperature": 0}, timeout=10)
            self.assertEqual(status, 200, body)
            self.assertLess(time.time() - t0, 2.0)
        for t in lorises:
            t.join(20)
        stop.set()
        # Each slow client was cut off at about the header timeout (1.5 s), long before it would
        # have finished its ~10 s header.
        self.assertEqual(len(closed_after), 12)
        for elapsed in closed_after:
            self.assertLess(elapsed, 5.0)
            self.assertGreater(elapsed, 1.0)

    def test_idle_keep_alive_connection_is_closed(self):
        conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=10)
        status, _, _ = harness.call(SERVER.port, "GET", "/health", conn=conn)
        self.assertEqual(status, 200)
        sock = conn.sock
        sock.settimeout(6)
        t0 = time.time()
        self.assertEqual(sock.recv(1), b"")  # the server closes it after --idle-timeout 2
        self.assertGreater(time.time() - t0, 1.0)
        conn.close()


class StalledReaderTest(unittest.TestCase):
    """--io-threads 1 and --write-timeout: a client that stops reading holds no thread, others are
    served meanwhile, and the write timeout closes it and cancels its request. --sse-flush-interval
    gathers a stream's events into fewer writes without changing what the client reads."""

    @classmethod
    def setUpClass(cls):
        cls.server = harness.ServerProcess("--io-threads", "1", "--write-timeout", "1",
                                           "--sse-flush-interval", "0.002")

    def test_gathered_stream_reads_the_same_as_a_blocking_answer(self):
        body = {"prompt": "gather me", "max_tokens": 300, "temperature": 0, "ignore_eos": True}
        status, whole = harness.post_json(self.server.port, "/v1/completions", body)
        self.assertEqual(status, 200, whole)
        s, got = harness.open_stream(self.server.port, dict(body, stream=True))
        while not got.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's end
            chunk = s.recv(65536)
            self.assertTrue(chunk, "the stream ended early")
            got += chunk
        s.close()
        # De-chunk the body, then read its events.
        raw, rest = b"", got.split(b"\r\n\r\n", 1)[1]
        while rest:
            size, rest = rest.split(b"\r\n", 1)
            raw, rest = raw + rest[:int(size, 16)], rest[int(size, 16) + 2:]
        events = harness.sse_events(raw.decode().splitlines())
        self.assertEqual(events[-1], "[DONE]")
        text = "".join(e["choices"][0]["text"] for e in events[:-1])
        self.assertEqual(text, whole["choices"][0]["text"])
        self.assertEqual(events[-2]["choices"][0]["finish_reason"], "length")

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, f"exit code {code}\n{cls.server.log()}"

    def test_stalled_reader_is_closed_by_the_write_timeout_and_others_are_served(self):
        port = self.server.port
        self.assertIn("io-threads", self.server.log())
        # A tiny receive window and large events (20 top logprobs each) fill the socket buffers
        # after a few hundred tokens; the client then reads nothing.
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(30)
        s.connect(("127.0.0.1", port))
        body = json.dumps(dict(harness.LONG_STREAM, logprobs=5)).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.assertEqual(harness.wait_metric(port, "sparkglm_num_requests_running", 1), 1)
        # The one I/O thread still serves everyone else.
        for i in range(3):
            status, reply = harness.post_json(port, "/v1/completions",
                                              {"prompt": f"hello {i}", "max_tokens": 8,
                                               "temperature": 0}, timeout=60)
            self.assertEqual(status, 200, reply)
        # The stalled write times out: the connection is closed and its request cancelled.
        self.assertEqual(harness.wait_metric(port, "sparkglm_num_requests_running", 0,
                                             timeout=60), 0, self.server.log())
        self.assertEqual(harness.wait_metric(port, "sparkglm_kv_blocks_used", 0), 0)
        self.assertGreaterEqual(finished_count("abort", port), 1)
        # What the client reads now ends (the server closed it) without the stream's end.
        got = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
        s.close()
        self.assertIn(b"200 OK", got[:200])
        self.assertNotIn(b"data: [DONE]", got)


def finished_count(reason, port=None):
    status, _, data = harness.call(port or SERVER.port, "GET", "/metrics")
    for line in data.decode().splitlines():
        if line.startswith(f'sparkglm_requests_finished_total{{finish_reason="{reason}"}}'):
            return float(line.split()[1])
    return 0.0


if __name__ == "__main__":
    harness.parse_args_and_run(globals())

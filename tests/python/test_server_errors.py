"""Every error sparkglm-serve answers, in OpenAI's shape {"error": {"message", "type", "code"}} with
its status: malformed JSON (ill-formed UTF-8 among it), wrong types, unknown model, prompt too long, a request that can never
fit in the KV pool, body too large, an encoded (gzip) body, too many connections, unknown route,
wrong method, missing or wrong API key, and the request timeout. The server keeps serving after each.

Run: python3 test_server_errors.py --bin-dir BUILD_DIR
"""
import gzip
import json
import os
import re
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402

SERVER = None
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def setUpModule():
    global SERVER
    # A pool of about 1300 tokens, below max-seq-len 2048: some requests can never fit.
    SERVER = harness.ServerProcess("--kv-cache-memory-bytes", "500KiB", "--max-seq-len", "2048",
                                   "--max-body-bytes", "4096", "--max-connections", "6")


def tearDownModule():
    if SERVER is not None:
        code = SERVER.stop()
        assert code == 0, f"exit code {code}\n{SERVER.log()}"


def read_head(sock):
    """Reads one response on a keep-alive connection: its head and its Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    want = int(m.group(1)) if m else 0
    while len(body) < want:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head


class ErrorShapeTest(unittest.TestCase):
    def expect_error(self, status, body_bytes, code=None, mentions=(), method="POST",
                     path="/v1/chat/completions", headers=None):
        got, hdrs, data = harness.call(SERVER.port, method, path, body_bytes, headers=headers)
        self.assertEqual(got, status, data)
        self.assertTrue(hdrs["content-type"].startswith("application/json"))
        err = json.loads(data)["error"]
        self.assertIsInstance(err["message"], str)
        self.assertIsInstance(err["type"], str)
        self.assertIn("code", err)
        if code:
            self.assertEqual(err["code"], code)
        for word in mentions:
            self.assertIn(word, err["message"])
        return err, hdrs

    def tearDown(self):
        # Whatever the error, the server still answers.
        status, body = harness.post_json(SERVER.port, "/v1/chat/completions", CHAT)
        self.assertEqual(status, 200, body)

    def test_malformed_json_is_400(self):
        self.expect_error(400, b'{"messages": [', "invalid_json")
        self.expect_error(400, b"[1, 2]", mentions=("JSON object",))
        self.expect_error(400, b"[" * 100 + b"]" * 100, mentions=("nested deeper than 64",))

    def test_ill_formed_utf8_is_400_and_the_error_is_json(self):
        # Bytes that are not UTF-8 inside a string (a Latin-1 byte, a lone continuation, a cut
        # character): refused as JSON, and the message quoting them is itself valid JSON text.
        for bad in (b"caf\xe9", b"x\x80y", b"\xe2\x82"):
            body = b'{"messages": [{"role": "user", "content": "' + bad + b'"}], "max_tokens": 4}'
            self.expect_error(400, body, "invalid_json", mentions=("UTF-8",))
            self.expect_error(400, body, "invalid_json", mentions=("UTF-8",), path="/v1/completions")

    def test_wrong_types_name_the_field(self):
        cases = [("temperature", "hot"), ("max_tokens", "5"), ("stream", "yes"), ("stop", 7),
                 ("seed", 1.5), ("top_k", [1]), ("messages", "hi")]
        for field, value in cases:
            body = dict(CHAT)
            body[field] = value
            err, _ = self.expect_error(400, json.dumps(body).encode(), mentions=(field,))
        bad = dict(CHAT, messages=[{"role": "user", "content": 5}])
        self.expect_error(400, json.dumps(bad).encode(), mentions=("messages[0]",))
        bad = {"prompt": "x", "logprobs": True}
        self.expect_error(400, json.dumps(bad).encode(), path="/v1/completions",
                          mentions=("logprobs",))

    def test_out_of_range_values_name_the_field(self):
        for field, value in [("temperature", 3.0), ("top_p", 0), ("max_tokens", 0),
                             ("top_logprobs", 50), ("n", 17)]:
            body = dict(CHAT)
            body[field] = value
            err, _ = self.expect_error(400, json.dumps(body).encode(), mentions=(field,))
            self.assertEqual(err["param"], field)

    def test_unknown_model_is_404(self):
        body = dict(CHAT, model="gpt-4o")
        self.expect_error(404, json.dumps(body).encode(), "model_not_found", ("gpt-4o",))

    def test_prompt_too_long_is_400_with_the_limit(self):
        body = {"prompt": "x" * 2100, "max_tokens": 1}
        err, _ = self.expect_error(400, json.dumps(body).encode(), "context_length_exceeded",
                                   ("2048",), path="/v1/completions")
        body = {"prompt": "x" * 100, "max_tokens": 2000}
        self.expect_error(400, json.dumps(body).encode(), mentions=("2048", "max-seq-len"),
                          path="/v1/completions")

    def test_request_that_can_never_fit_is_400_with_the_limits(self):
        # Within max-seq-len, beyond the whole KV pool (~1300 tokens): the engine refuses it.
        body = {"prompt": "x" * 100, "max_tokens": 1500}
        err, _ = self.expect_error(400, json.dumps(body).encode(), path="/v1/completions")
        self.assertEqual(err["code"], "request_too_large_for_server")
        self.assertRegex(err["message"], r"\d+")
        self.assertIn("pool", err["message"].lower())

    def test_encoded_body_is_415_naming_the_coding(self):
        # A gzip body would otherwise be parsed as its compressed bytes; identity is no coding.
        body = gzip.compress(json.dumps(CHAT).encode())
        for path in ("/v1/chat/completions", "/tokenize"):
            err, hdrs = self.expect_error(415, body, "unsupported_content_encoding", ("gzip",),
                                          path=path, headers={"Content-Encoding": "gzip"})
            self.assertEqual(hdrs["accept-encoding"], "identity")
        status, _, data = harness.call(SERVER.port, "POST", "/v1/chat/completions",
                                       json.dumps(CHAT).encode(),
                                       headers={"Content-Encoding": "identity"})
        self.assertEqual(status, 200, data)

    def test_body_too_large_is_413(self):
        big = json.dumps(dict(CHAT, pad="x" * 5000)).encode()
        self.expect_error(413, big, "request_too_large", ("4096",))
        # Chunked, without a Content-Length: the limit holds while reading.
        s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=10)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        for _ in range(6):
            s.sendall(b"400\r\n" + b"x" * 1024 + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:100])

    def test_unknown_route_is_404_and_wrong_method_405(self):
        self.expect_error(404, None, "not_found", method="GET", path="/v2/whatever")
        _, hdrs = self.expect_error(405, None, "method_not_allowed", method="GET",
                                    path="/v1/chat/completions")
        self.assertEqual(hdrs["allow"], "POST")
        self.expect_error(405, b"{}", method="POST", path="/v1/models")

    def test_too_many_connections_is_503(self):
        held = []
        try:
            # Fill the server's six places, then one more. A place counts as taken once the
            # server has answered on it: connections of earlier tests may still be leaving (the
            # server counts a connection until it has read the client's FIN), and a connection
            # opened meanwhile is answered 503, so that one is retried.
            deadline = time.time() + 10
            while len(held) < 6:
                s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=10)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                head = read_head(s)
                if head.startswith(b"HTTP/1.1 200"):
                    held.append(s)  # keep-alive: the place stays taken
                    continue
                s.close()
                self.assertTrue(head.startswith(b"HTTP/1.1 503"), head)
                self.assertLess(time.time(), deadline, "earlier connections never left")
                time.sleep(0.05)
            extra = socket.create_connection(("127.0.0.1", SERVER.port), timeout=10)
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while True:
                chunk = extra.recv(65536)
                if not chunk:
                    break
                data += chunk
            extra.close()
            head, _, body = data.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 503"), head)
            err = json.loads(body)["error"]
            self.assertEqual(err["code"], "too_many_connections")
            self.assertIn("6", err["message"])
        finally:
            for s in held:
                s.close()
        # Places free up as soon as the clients leave.
        deadline = time.time() + 5
        while time.time() < deadline:
            if harness.call(SERVER.port, "GET", "/health")[0] == 200:
                break
            time.sleep(0.05)
        self.assertEqual(harness.call(SERVER.port, "GET", "/health")[0], 200)


class TimeoutTest(unittest.TestCase):
    def test_request_timeout_is_504_or_an_error_event(self):
        with harness.ServerProcess("--request-timeout", "0.2") as srv:
            # Thousands of tokens: seconds of work, cut at 0.2 s.
            body = {"prompt": "go on", "max_tokens": 30000, "temperature": 0, "ignore_eos": True}
            t0 = time.time()
            status, data = harness.post_json(srv.port, "/v1/completions", body)
            self.assertEqual(status, 504, data)
            self.assertEqual(data["error"]["code"], "request_timeout")
            self.assertIn("request-timeout", data["error"]["message"])
            self.assertLess(time.time() - t0, 3)
            status, _, raw = harness.call(srv.port, "POST", "/v1/completions",
                                          dict(body, stream=True))
            self.assertEqual(status, 200)
            events = harness.sse_events(raw.decode(errors="replace").splitlines())
            self.assertEqual(events[-1], "[DONE]")
            self.assertEqual(events[-2]["error"]["code"], "request_timeout")
            self.assertGreater(len(events), 3)  # some tokens streamed before the deadline
            self.assertEqual(harness.wait_metric(srv.port, "sparkglm_kv_blocks_used", 0), 0)
            # Short requests are unaffected.
            status, data = harness.post_json(srv.port, "/v1/completions",
                                             {"prompt": "hi", "max_tokens": 4})
            self.assertEqual(status, 200, data)
            self.assertEqual(srv.stop(), 0)


class ApiKeyTest(unittest.TestCase):
    def test_api_key_guards_every_route_but_health(self):
        with harness.ServerProcess("--api-key", "s3cret") as srv:
            self.assertNotIn("s3cret", srv.log())  # never logged
            for headers in [None, {"Authorization": "Bearer wrong"},
                            {"Authorization": "s3cret"}]:
                status, hdrs, data = harness.call(srv.port, "GET", "/v1/models", headers=headers)
                self.assertEqual(status, 401, data)
                self.assertEqual(json.loads(data)["error"]["code"], "invalid_api_key")
                self.assertEqual(hdrs["www-authenticate"], "Bearer")
            status, _, _ = harness.call(srv.port, "GET", "/v1/models",
                                        headers={"Authorization": "Bearer s3cret"})
            self.assertEqual(status, 200)
            status, body = harness.post_json(srv.port, "/v1/chat/completions", CHAT,
                                             headers={"Authorization": "Bearer s3cret"})
            self.assertEqual(status, 200, body)
            self.assertEqual(harness.call(srv.port, "GET", "/health")[0], 200)
            # Every other route needs the key, /tokenize, /detokenize and /metrics included.
            key = {"Authorization": "Bearer s3cret"}
            for method, path, body in [("GET", "/metrics", None),
                                       ("POST", "/tokenize", {"prompt": "a"}),
                                       ("POST", "/detokenize", {"tokens": [1]})]:
                self.assertEqual(harness.call(srv.port, method, path, body)[0], 401, path)
                self.assertEqual(harness.call(srv.port, method, path, body, headers=key)[0],
                                 200, path)
            self.assertEqual(srv.stop(), 0)

    def test_metrics_without_auth_opens_only_metrics(self):
        with harness.ServerProcess("--api-key", "s3cret", "--metrics-without-auth", True) as srv:
            self.assertEqual(harness.call(srv.port, "GET", "/metrics")[0], 200)
            self.assertEqual(harness.call(srv.port, "POST", "/tokenize", {"prompt": "a"})[0], 401)
            self.assertEqual(harness.call(srv.port, "GET", "/v1/models")[0], 401)
            self.assertEqual(srv.stop(), 0)

    def test_without_api_key_v1_is_open(self):
        status, _, _ = harness.call(SERVER.port, "GET", "/v1/models",
                                    headers={"Authorization": "Bearer anything"})
        self.assertEqual(status, 200)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())

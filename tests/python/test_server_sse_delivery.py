"""Tokens leave when they are made: with other processes loading every core, a stream's events still
reach the client about one per socket read (not in bursts that make client-side inter-token times
fiction), and /metrics has sparkglm_sse_emit_delay_seconds, the server-side delay from a token's
sampling to its event's write, with one observation per streamed token.

The load is two busy-loop processes (the CI machine has two cores). The judge is the median read:
a server that gathers events writes two or more in most of its writes, so most reads hold two or
more. The client shares the loaded cores, and a scheduler slice it misses (a few ms, many tokens
of tinyGLM-micro) makes one read of ten or more now and then: a mean would count that against the
server, the median does not. One round of three within the bound passes.

Run: python3 test_server_sse_delivery.py --bin-dir BUILD_DIR
"""
import re
import statistics
import selectors
import subprocess
import sys
import time
import unittest

from test_server_lifecycle import ServerProcess, call, open_stream, parse_args_and_run

TOKENS = 64
MAX_MEDIAN_EVENTS_PER_READ = 1
HISTOGRAM = "sparkglm_sse_emit_delay_seconds"


def stream_concurrently(port, streams):
    """Runs `streams` completions at once; returns per stream the number of events in each read."""
    body = {"prompt": "tell me a story", "max_tokens": TOKENS, "temperature": 0,
            "ignore_eos": True, "stream": True}
    sel = selectors.DefaultSelector()
    reads = {}
    for _ in range(streams):
        sock, head = open_stream(port, body)
        sock.setblocking(False)
        reads[sock] = []
        first = head.split(b"\r\n\r\n", 1)[1].count(b"data: ")
        if first:
            reads[sock].append(first)
        sel.register(sock, selectors.EVENT_READ)
    open_count = streams
    while open_count:
        ready = sel.select(60)
        if not ready:
            raise AssertionError("a stream stalled for 60 s")
        for key, _ in ready:
            sock = key.fileobj
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            if data:
                reads[sock].append(data.count(b"data: "))
            if not data or b"data: [DONE]" in data:
                sel.unregister(sock)
                sock.close()
                open_count -= 1
    return list(reads.values())


def histogram(port):
    """{le: cumulative count} and the _count of the emit-delay histogram."""
    status, _, data = call(port, "GET", "/metrics")
    assert status == 200, status
    text = data.decode()
    buckets = {m.group(1): int(m.group(2)) for m in
               re.finditer(HISTOGRAM + r'_bucket\{le="([^"]+)"\} (\d+)', text)}
    count = re.search("^" + HISTOGRAM + r"_count (\d+)$", text, re.M)
    return buckets, int(count.group(1)) if count else None


def p99_bound(before, after):
    """The smallest bucket bound holding 99% of the observations made between two scrapes."""
    total = after["+Inf"] - before.get("+Inf", 0)
    for le, n in after.items():
        if n - before.get(le, 0) >= 0.99 * total:
            return le, total
    return "+Inf", total


class SseDeliveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(2)]

    @classmethod
    def tearDownClass(cls):
        for h in cls.hogs:
            h.kill()
            h.wait()

    def check_delivery(self, streams):
        # The reads are the client's, and the client shares the loaded cores: a scheduler slice
        # it misses lets a few events pile up once. A server that bursts does it every time, so
        # up to three attempts are made and one within the bound passes.
        seen = []
        with ServerProcess() as srv:
            for _ in range(3):
                median, per_stream = self.measure(srv.port, streams)
                seen.append(per_stream)
                if median <= MAX_MEDIAN_EVENTS_PER_READ:
                    return
        self.fail(f"the median read held more than {MAX_MEDIAN_EVENTS_PER_READ} events in three "
                  f"rounds: {seen}")

    def measure(self, port, streams):
        """One round of `streams` streams: the median events per read, and the reads per stream."""
        before, count_before = histogram(port)
        self.assertIsNotNone(count_before, "no " + HISTOGRAM + " in /metrics")
        per_stream = stream_concurrently(port, streams)
        # One observation per token of every stream (the last one travels with the finish, and
        # is recorded a moment after [DONE] went out).
        deadline = time.time() + 5
        after, count_after = histogram(port)
        while count_after - count_before < streams * TOKENS and time.time() < deadline:
            time.sleep(0.02)
            after, count_after = histogram(port)
        self.assertEqual(count_after - count_before, streams * TOKENS)
        events = sum(sum(r) for r in per_stream)
        reads = sum(len([n for n in r if n]) for r in per_stream)
        median = statistics.median(n for r in per_stream for n in r if n)
        print(f"C{streams}: {events} events in {reads} reads ({events / reads:.2f} a read, median "
              f"{median}, at most {max(max(r) for r in per_stream)}); server p99 within "
              f"{p99_bound(before, after)[0]} s", file=sys.stderr)
        return median, per_stream

    def test_one_stream_under_load_arrives_about_one_event_per_read(self):
        self.check_delivery(1)

    def test_four_streams_under_load_arrive_about_one_event_per_read(self):
        self.check_delivery(4)


if __name__ == "__main__":
    parse_args_and_run(globals())

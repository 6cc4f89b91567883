"""The HTML report renders in a real browser: headless Chromium loads report.html of the A/B and
the measurement fixtures (rendered by tests/report_tool, the same code as `sparkglm-qualify
report`), and its DOM must hold one <svg> per chart with the chart titles, the ratio chart and no
script; its screenshot must be a real image of the page: not blank, with the PASS header's green
and the arms' chart colours painted.

Chromium is part of the test environment (Debian package `chromium`): without it this test FAILS.

Run: python3 test_report_html.py --bin-dir BUILD_DIR
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib
from html.parser import HTMLParser

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "data", "reports")
AB_ID = "2026-11-29-g2-kv-fp8-g128-ab"
MEASUREMENT_ID = "2026-11-29-g2-tinyglm-micro-measurement"
BIN_DIR = None

PASS_GREEN = (0x2E, 0x7D, 0x32)  # header.pass background
CANDIDATE_BLUE = (0x1F, 0x6F, 0xB4)
BASELINE_GREY = (0x7A, 0x7A, 0x7A)


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("chromium is not installed (Debian: apt-get install chromium); the HTML "
                         "report check needs a real browser and does not skip without one")


def run_chromium(args, workdir):
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-dev-shm-usage", "--hide-scrollbars",
           "--user-data-dir=" + os.path.join(workdir, "profile")] + args
    proc = subprocess.run(cmd, capture_output=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"chromium failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return proc.stdout.decode()


class DomSummary(HTMLParser):
    """Counts the elements of the dumped DOM and collects the SVG titles."""

    def __init__(self):
        super().__init__()
        self.tags = {}
        self.classes = {}
        self.svg_titles = []
        self.stack = []
        self.header_text = ""
        self.in_header = False

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            if name == "class":
                for c in value.split():
                    self.classes[c] = self.classes.get(c, 0) + 1
        if tag == "header":
            self.in_header = True
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag == "header":
            self.in_header = False
        while self.stack:
            if self.stack.pop() == tag:
                break

    def handle_data(self, data):
        if self.in_header:
            self.header_text += data
        # A chart's own <title> is the first child of its <svg>.
        if len(self.stack) >= 2 and self.stack[-1] == "title" and self.stack[-2] == "svg":
            self.svg_titles.append(data)


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 255
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def color_counts(path):
    width, height, bpp, rows = png_pixels(path)
    counts = {}
    for line in rows:
        for x in range(0, width * bpp, bpp):
            rgb = (line[x], line[x + 1], line[x + 2])
            counts[rgb] = counts.get(rgb, 0) + 1
    return width, height, counts


class ReportHtmlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = os.path.join(BIN_DIR, "tests", "report_tool")
        if not os.path.exists(cls.tool):
            raise AssertionError(f"{cls.tool} is missing; build the report_tool target")
        cls.work = tempfile.mkdtemp(prefix="sparkglm-report-html-")
        cls.pages = {}
        for bundle_id in (AB_ID, MEASUREMENT_ID):
            out = os.path.join(cls.work, bundle_id)
            proc = subprocess.run([cls.tool, "report", os.path.join(FIXTURES, bundle_id),
                                   "--out", out], capture_output=True, timeout=120)
            if proc.returncode != 0:
                raise AssertionError(f"report_tool failed: {proc.stderr.decode()}")
            cls.pages[bundle_id] = os.path.join(out, "report.html")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def dom(self, bundle_id):
        dumped = run_chromium(["--dump-dom", "file://" + self.pages[bundle_id]], self.work)
        summary = DomSummary()
        summary.feed(dumped)
        return summary

    def test_ab_dom_has_every_chart(self):
        dom = self.dom(AB_ID)
        self.assertEqual(dom.tags.get("svg"), 5, dom.tags)  # 2 cases x (TTFT, decode) + A/B
        self.assertEqual(dom.tags.get("script", 0), 0)
        for case in ("tinyglm-gate / decode_c1", "tinyglm-gate / mixed_c4"):
            self.assertIn(f"TTFT per request, {case}", dom.svg_titles)
            self.assertIn(f"Decode rate per request, {case}", dom.svg_titles)
        self.assertIn("A/B ratios with 95% CI", dom.svg_titles)
        self.assertEqual(dom.classes.get("ratio"), 8, dom.classes)  # 2 cases x 4 metrics
        self.assertEqual(dom.classes.get("whisker"), 8, dom.classes)
        # 5 + 20 timed requests per arm, each drawn in both of its case's charts.
        self.assertEqual(dom.classes.get("sample"), 2 * 2 * 25, dom.classes)
        self.assertTrue(dom.header_text.startswith("PASS"), dom.header_text)

    def test_measurement_dom_has_no_ab_chart(self):
        dom = self.dom(MEASUREMENT_ID)
        self.assertEqual(dom.tags.get("svg"), 4, dom.tags)
        self.assertNotIn("A/B ratios with 95% CI", dom.svg_titles)
        self.assertEqual(dom.classes.get("sample"), 2 * 3 * 5, dom.classes)

    def test_screenshot_shows_the_page(self):
        png = os.path.join(self.work, "ab.png")
        # Half scale keeps the PNG small enough to decode in pure Python quickly.
        run_chromium(["--screenshot=" + png, "--window-size=1100,2600",
                      "--force-device-scale-factor=0.5", "file://" + self.pages[AB_ID]],
                     self.work)
        self.assertTrue(os.path.exists(png), "no screenshot written")
        width, height, counts = color_counts(png)
        self.assertGreater(width * height, 0)
        top = sorted(counts.values(), reverse=True)
        # Not blank: the commonest colour (the background) is far from all of the page.
        self.assertLess(top[0], 0.95 * width * height, "the screenshot is (nearly) one colour")
        self.assertGreater(len(counts), 50, "too few colours for a page of text and charts")
        self.assertGreater(counts.get(PASS_GREEN, 0), 500, "the PASS header is not painted")
        def near(rgb, target, tolerance=24):
            return all(abs(a - b) <= tolerance for a, b in zip(rgb, target))
        blue = sum(n for rgb, n in counts.items() if near(rgb, CANDIDATE_BLUE))
        grey = sum(n for rgb, n in counts.items() if near(rgb, BASELINE_GREY, 10))
        self.assertGreater(blue, 20, "no candidate-coloured marks: the SVG charts did not paint")
        self.assertGreater(grey, 20, "no baseline-coloured marks: the SVG charts did not paint")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    unittest.main(argv=[sys.argv[0]] + rest)

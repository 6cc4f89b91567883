"""bench/cuda/step_kernels.py reads Nsight Compute's raw CSV (one row per metric and launch) and
tabulates the last step: only launches from the last step-start kernel on, names without their
arguments (template arguments kept), grouped sums, and a clear error when the CSV holds no step.

Run: python3 test_step_kernels.py --bin-dir BUILD_DIR (the build folder is not used)
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "cuda", "step_kernels.py")
sys.path.insert(0, os.path.dirname(TOOL))
import step_kernels  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(i, kernel, metric, value):
    return (f'"{i}","1","bench","h","{kernel}","1","14","(256, 1, 1)","(8, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","x","{value}"')


def ncu_csv(launches):
    """launches: [(kernel name as ncu prints it, ns, bytes)]; ncu's banner lines around them."""
    lines = ["==PROF== Connected to process 1", HEADER]
    for i, (k, ns, b) in enumerate(launches):
        lines.append(row(i, k, "gpu__time_duration.sum", f"{ns:,}"))
        lines.append(row(i, k, "dram__bytes_read.sum", f"{b:,}"))
    lines.append("==PROF== Disconnected from process 1")
    return "\n".join(lines) + "\n"


STEP = [("embed_kernel(Params)", 2000, 1000),
        ("void q_kernel<1, 1, 0>((anonymous namespace)::Args)", 10000, 20_000_000),
        ("void q_kernel<1, 1, 0>((anonymous namespace)::Args)", 6000, 10_000_000),
        ("combine_kernel(Args)", 2000, 0)]


class StepKernelsTest(unittest.TestCase):
    def run_tool(self, text, *args):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(text)
        try:
            p = subprocess.run([sys.executable, TOOL, f.name, *args], capture_output=True,
                               text=True, timeout=60)
        finally:
            os.unlink(f.name)
        return p.returncode, p.stdout, p.stderr

    def test_names_lose_their_arguments_and_keep_template_arguments(self):
        self.assertEqual(step_kernels.kernel_name(
            "void q_kernel<1, 1, 0>((anonymous namespace)::GemvArgs)"), "q_kernel<1, 1, 0>")
        self.assertEqual(step_kernels.kernel_name("rms_norm_kernel(float const*)"),
                         "rms_norm_kernel")

    def test_only_the_last_step_is_tabulated_and_grouped(self):
        first = [("embed_kernel(Params)", 99000, 0), ("combine_kernel(Args)", 99000, 0)]
        rc, out, err = self.run_tool(ncu_csv(first + STEP))
        self.assertEqual(rc, 0, err)
        self.assertIn("# 4 launches, 20.0 us of kernel time", out)
        group = [l for l in out.splitlines() if l.startswith("#   q_kernel<1, 1, 0>")]
        self.assertEqual(len(group), 1, out)
        fields = group[0].split()
        # 2 launches, 16 us, 80 % of the step, 30 MB, 1875 GB/s (bytes per ns)
        self.assertEqual(fields[-5:], ["2", "16.0", "80.0", "30.0", "1875"])

    def test_a_csv_without_the_step_start_is_an_error_that_names_it(self):
        rc, _, err = self.run_tool(ncu_csv(STEP[1:]))
        self.assertNotEqual(rc, 0)
        self.assertIn("embed_kernel", err)
        rc, _, err = self.run_tool("==PROF== nothing profiled\n")
        self.assertNotEqual(rc, 0)
        self.assertIn("no ncu metric rows", err)

    def test_another_step_start(self):
        rc, out, err = self.run_tool(ncu_csv(STEP), "--step-start", "combine")
        self.assertEqual(rc, 0, err)
        self.assertIn("# 1 launches, 2.0 us", out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir")
    args, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)

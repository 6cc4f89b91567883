"""ci/pdl_check.py: every kernel launched with launch_dependent reaches pdl_wait() before its first
return, and the check can fail.

1. The project's own CUDA sources pass.
2. A copy of them with the wait taken out of one launched kernel (dsa_select.cu's select_kernel)
   fails, naming that kernel; so does one with the wait moved below an early return.
3. On small synthetic sources: a wait inside a __device__ helper called before the return
   passes; a lambda's own return does not count; a kernel named through a local
   `auto* kernel = name<...>;` is resolved; a launched kernel with no definition is reported.

Run: python3 test_pdl_check.py --bin-dir BUILD_DIR (the build folder is not used)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
CHECK = os.path.join(ROOT, "ci", "pdl_check.py")
CUDA = os.path.join("engine", "backend", "cuda")


def run_check(root):
    proc = subprocess.run([sys.executable, CHECK, "--root", root], capture_output=True,
                          timeout=120)
    return proc.returncode, proc.stdout.decode() + proc.stderr.decode()


class PdlCheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.realpath(self.tmp.name)
        os.makedirs(os.path.join(self.root, CUDA))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.root, CUDA, name), "w") as f:
            f.write(text)

    def copy_project(self):
        shutil.rmtree(os.path.join(self.root, CUDA))
        shutil.copytree(os.path.join(ROOT, CUDA), os.path.join(self.root, CUDA))

    def edit(self, name, old, new):
        path = os.path.join(self.root, CUDA, name)
        with open(path) as f:
            text = f.read()
        self.assertEqual(text.count(old), 1, f"{name}: the text to edit must occur once")
        with open(path, "w") as f:
            f.write(text.replace(old, new))

    def test_the_projects_sources_pass(self):
        code, out = run_check(ROOT)
        self.assertEqual(code, 0, out)

    def test_a_launched_kernel_without_its_wait_fails_by_name(self):
        self.copy_project()
        self.edit("dsa_select.cu", "  pdl_wait();  // the scores of the kernel ahead\n", "")
        code, out = run_check(self.root)
        self.assertEqual(code, 1, out)
        self.assertIn("dsa_select.cu: select_kernel is launched with launch_dependent", out)
        self.assertEqual(out.count("pdl_check: dsa_select.cu"), 1, out)

    def test_a_wait_below_an_early_return_fails(self):
        self.copy_project()
        self.edit("latent_store.cu",
                  "  pdl_wait();  // the keys and gates of the kernels ahead\n"
                  "  pdl_trigger();\n"
                  "  store_key_row(",
                  "  if (blockIdx.x > 4096) return;\n"
                  "  pdl_wait();\n"
                  "  store_key_row(")
        code, out = run_check(self.root)
        self.assertEqual(code, 1, out)
        self.assertIn("store_keys_kernel", out)

    def test_helpers_lambdas_and_aliases(self):
        self.write("pdl.cuh", "void launch_dependent(void (*kernel)(Params...), dim3 grid);\n")
        self.write("a.cu", """
__device__ void stage(const float* w) { pdl_wait(); }
__global__ void helped_kernel(const float* w, int n) {
  auto at = [&](int v) { return w + v; };
  stage(w);  // waits inside
  if (n == 0) return;
}
__global__ void lambda_only_kernel(const float* w, int n) {
  auto at = [&](int v) { return w + v; };
  pdl_wait();
}
template <int kT>
__global__ void late_kernel(const float* w, int n) {
  if (n == 0) return;
  pdl_wait();
}
void go(cudaStream_t s) {
  launch_dependent(helped_kernel, 1, 32, 0, s, nullptr, 1);
  launch_dependent(lambda_only_kernel, 1, 32, 0, s, nullptr, 1);
  auto* kernel = late_kernel<4>;
  launch_dependent(kernel, 1, 32, 0, s, nullptr, 1);
  launch_dependent(missing_kernel, 1, 32, 0, s);
}
""")
        code, out = run_check(self.root)
        self.assertEqual(code, 1, out)
        self.assertNotIn("helped_kernel", out)
        self.assertNotIn("lambda_only_kernel", out)
        self.assertIn("a.cu: late_kernel is launched with launch_dependent", out)
        self.assertIn("launch_dependent(missing_kernel): no __global__ definition found", out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir")
    args, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)

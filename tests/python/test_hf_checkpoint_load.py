"""Hugging Face tooling loads the checkpoints `sparkglm tinyglm make` writes.

1. transformers.AutoConfig reads tinyglm-micro's config.json and agrees with it: attention heads,
   key/value heads, layer kinds, dense MLP layers, vocabulary (it once refused the file:
   num_key_value_heads 64, its default, against num_attention_heads 4).
2. transformers.AutoTokenizer reads the tokenizer files and round-trips text.
3. The engine still serves the same directory (the parser accepts what the writer adds).

torch is not needed: configuration and tokenizers only. Skips when transformers is not importable.
Run: python3 test_hf_checkpoint_load.py --bin-dir BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server_lifecycle as harness  # noqa: E402  (the shared --bin-dir main)

BIN_DIR = None

try:
    import transformers  # noqa: F401
    HAVE_TRANSFORMERS = True
except ImportError:
    HAVE_TRANSFORMERS = False


@unittest.skipUnless(HAVE_TRANSFORMERS, "transformers is not importable")
class HfLoadsTinyglmMicro(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ckpt = os.path.join(cls.tmp.name, "ckpt")
        subprocess.run([os.path.join(BIN_DIR, "sparkglm"), "tinyglm", "make", "--preset",
                        "tinyglm-micro", "--out", cls.ckpt], check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        with open(os.path.join(cls.ckpt, "config.json")) as f:
            cls.written = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_auto_config_loads_and_agrees(self):
        from transformers import AutoConfig
        cfg = AutoConfig.from_pretrained(self.ckpt)
        text = getattr(cfg, "text_config", cfg)
        w = self.written
        self.assertEqual(text.num_attention_heads, w["num_attention_heads"])
        self.assertEqual(text.num_key_value_heads, w["num_attention_heads"])
        self.assertEqual(text.num_hidden_layers, w["num_hidden_layers"])
        self.assertEqual(text.vocab_size, w["vocab_size"])
        self.assertEqual(text.hidden_size, w["hidden_size"])
        dense = [t == "dense" for t in text.mlp_layer_types]
        self.assertEqual(dense, [i < w["first_k_dense_replace"]
                                 for i in range(w["num_hidden_layers"])])
        kinds = ["linear" if t == "linear_attention" else "sparse" for t in text.layer_types]
        ours = ["linear" if t == "linear_attention" else "sparse" for t in w["layer_types"]]
        self.assertEqual(kinds, ours)

    def test_auto_tokenizer_round_trips_text(self):
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(self.ckpt)
        text = "Hello, tinyGLM: caf\u00e9 \u2713"
        ids = tok.encode(text, add_special_tokens=False)
        self.assertTrue(all(0 <= i < self.written["vocab_size"] for i in ids), ids)
        self.assertEqual(tok.decode(ids), text)

    def test_engine_still_serves_the_directory(self):
        with harness.ServerProcess("--preset", None, "--model", self.ckpt, bin_dir=BIN_DIR) as s:
            status, _, body = harness.call(s.port, "GET", "/v1/models")
            self.assertEqual(status, 200, body)


if __name__ == "__main__":
    harness.parse_args_and_run(globals())

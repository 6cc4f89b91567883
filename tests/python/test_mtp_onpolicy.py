"""The on-policy fine-tune's data (tinyglm/train/finetune_mtp_onpolicy.py): what it trains on is the
engine's replies to its own prompt set, laid out as curriculum.batch lays out training rows.

1. row: prompt rows weigh prompt_weight, reply rows 1 (weights[t] weighs predicting tokens[t + 1],
   so the last prompt row predicts the first reply token), padding <|endoftext|> with weight 0.
2. batches: every example once an epoch, at most tokens_per_step padded tokens a batch (a longer
   example alone), the same batches for the same seed and others for another.
3. load_pairs refuses a replies file that is not the prompt set's (count), a k > 0 cell, an
   example no request took and an id outside the vocabulary, each naming what is wrong.
4. draw_prompts draws none of the held-out set's examples (another key), deterministically, its
   buckets in turn.

Skips when torch is not importable (CI has no torch).
Run: python3 test_mtp_onpolicy.py [--bin-dir BUILD_DIR]
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tinyglm", "train"))
HELDOUT = os.path.join(HERE, "..", "..", "tinyglm", "weights", "tinyglm-micro-trained", "heldout.json")

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def check_row(op):
    eot = op.curriculum.chat.END_OF_TEXT
    tokens, weights = op.row([5, 6, 7], [8, 9], 8, 0.1)
    failures = []
    if tokens != [5, 6, 7, 8, 9, eot, eot, eot]:
        failures.append(f"row tokens {tokens}")
    if weights != [0.1, 0.1, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]:
        failures.append(f"row weights {weights}")
    return failures


def check_batches(op):
    pairs = [([1] * (10 + 37 * i % 300), [2] * (1 + i % 20)) for i in range(150)]
    failures = []
    b1 = op.batches(pairs, 600, 7)
    if sorted(i for b in b1 for i in b) != list(range(len(pairs))):
        failures.append("an epoch does not hold every example once")
    for b in b1:
        longest = max(len(pairs[i][0]) + len(pairs[i][1]) for i in b)
        if len(b) > 1 and longest * len(b) > 600:
            failures.append(f"a batch of {len(b)} x {longest} tokens over 600")
    if op.batches(pairs, 600, 7) != b1 or op.batches(pairs, 600, 8) == b1:
        failures.append("batches do not follow the seed")
    return failures


def check_refusals(op):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        prompts = {"schema": "sparkglm.heldout/1", "examples": [
            {"task": "copy", "bucket": 512, "reply_from": 2, "tokens": [3, 4, 5]},
            {"task": "copy", "bucket": 512, "reply_from": 1, "tokens": [6, 7]}]}
        p = os.path.join(tmp, "p.json")
        with open(p, "w") as f:
            json.dump(prompts, f)

        def load(replies, k=0):
            r = os.path.join(tmp, "r.json")
            with open(r, "w") as f:
                json.dump({"schema": "sparkglm.bench_outputs/1", "k": k, "replies": replies}, f)
            try:
                return op.load_pairs(p, r, 10)
            except SystemExit as e:
                return str(e)

        got = load([[1, 2], [9]])
        if got != [([3, 4], [1, 2]), ([6], [9])]:
            failures.append(f"pairs {got}")
        for replies, k, want in (([[1]], 0, "1 replies for 2 prompts"), ([[1], [2]], 2, "k = 0"),
                                 ([[1], []], 0, "example 1: 0 reply tokens"),
                                 ([[1], [10]], 0, "example 1: a token id outside 0..9")):
            got = load(replies, k)
            if not isinstance(got, str) or want not in got:
                failures.append(f"replies {replies} k {k}: {got!r}, want an error naming {want!r}")
    return failures


def check_draws(op):
    drawn = op.draw_prompts(24)
    if op.draw_prompts(24) != drawn:
        return ["draw_prompts is not deterministic"]
    with open(HELDOUT) as f:
        held = {tuple(e["tokens"]) for e in json.load(f)["examples"]}
    same = [i for i, e in enumerate(drawn["examples"]) if tuple(e["tokens"]) in held]
    failures = [f"examples {same} are held-out examples"] if same else []
    if [e["bucket"] for e in drawn["examples"][:4]] != [512, 1024, 2048, 512]:
        failures.append("the default buckets are not drawn in turn")
    if {e["bucket"] for e in op.draw_prompts(3, (4096,))["examples"]} != {4096}:
        failures.append("--buckets 4096 drew other lengths")
    return failures


def main():
    if not HAVE_TORCH:
        print("SKIP: torch is not importable (pip install torch to check the on-policy fine-tune's data)")
        return 0
    import finetune_mtp_onpolicy as op
    failures = check_row(op) + check_batches(op) + check_refusals(op) + check_draws(op)
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS: rows, batches, refusals and draws as stated")
    return 0


if __name__ == "__main__":
    sys.exit(main())

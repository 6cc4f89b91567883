"""The held-out set of a trained tinyGLM: curriculum examples no training step can draw.

Training rows are drawn by Draws(seed, step, row) with an integer seed; these by
Draws("heldout", T, i), a key no training run produces, so the set measures what the model
learned, not what it memorised. Buckets up to 4096 tokens are drawn in turn (i = 0, 1, ...) and an
example is kept while its task has fewer than `per_task`, so every task is scored on as many
examples whatever its share of the training mix. Each keeps its task name, its token ids (prompt + reply, byte-level chat as the server renders it) and
where the reply starts. harness/heldout_loss.h scores the reply tokens under teacher forcing.

Run: python3 tinyglm/train/heldout.py --out tinyglm/weights/tinyglm-micro-trained/heldout.json
The output is a pure function of (per_task, buckets, the curriculum's GENERATOR_VERSION).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import curriculum  # noqa: E402

SCHEMA = "sparkglm.heldout/1"
BUCKETS = (512, 1024, 2048, 4096)


class LabelledDraws(curriculum.Draws):
    """Draws that remember the task curriculum.example picked: its pick over the bucket's sorted task
    names (the last one, when a tool prompt too long for T is drawn again). The draws are the same,
    so the example is too; curriculum.py stays the file that trained the committed weights (its
    sha256 is bound in their training.json)."""

    def __init__(self, T, *key):
        super().__init__(*key)
        self.names = sorted(curriculum.TASK_MIX[T])
        self.task = None

    def pick(self, seq, weights=None):
        value = super().pick(seq, weights)
        if list(seq) == self.names:
            self.task = value
        return value


def heldout(per_task=6, buckets=BUCKETS):
    tasks = sorted({t for T in buckets for t in curriculum.TASK_MIX[T]})
    kept = {t: 0 for t in tasks}
    examples = []
    i = 0
    while any(n < per_task for n in kept.values()):
        if i >= 10000:
            raise RuntimeError(f"tasks short of {per_task} examples after {i} draws: {kept}")
        for T in buckets:
            rng = LabelledDraws(T, "heldout", T, i)
            prompt, reply = curriculum.example(rng, T)
            task = rng.task
            if kept[task] < per_task:
                kept[task] += 1
                examples.append({"task": task, "bucket": T, "reply_from": len(prompt),
                                 "tokens": prompt + reply})
        i += 1
    return {"schema": SCHEMA, "generator": curriculum.GENERATOR_VERSION, "draws": "heldout:T:i",
            "per_task": per_task, "buckets": list(buckets), "examples": examples}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-task", type=int, default=6)
    args = ap.parse_args()
    data = heldout(args.per_task)
    with open(args.out, "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")
    n = sum(len(e["tokens"]) for e in data["examples"])
    print(f"wrote {args.out}: {len(data['examples'])} examples, {n} tokens")


if __name__ == "__main__":
    main()

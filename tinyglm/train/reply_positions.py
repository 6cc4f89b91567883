"""Which reply tokens a trained tinyGLM gets right: the held-out replies, position by position.

For each held-out example of the chosen tasks, the model runs teacher-forced over prompt and reply and
prints one mark per reply token: '.' where the token is the argmax of the row before it, 'x' where it
is not, beside the reply's text. A two-hop needle reply ("code abcd-1234 -> value 12345678") shows
which hop fails: the code's letters (the first lookup), or the value's digits (the second, with the
right code already written).

Run: python3 tinyglm/train/reply_positions.py [--checkpoint DIR] [--tasks needle,prose_fact] [--threads 2]
Needs torch; a diagnostic for whoever trains the next model, not a gate.
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import byte_chat as chat  # noqa: E402
import checkpoint_io  # noqa: E402

DEFAULT = os.path.join(HERE, "..", "weights", "tinyglm-micro-trained")


def marks(model, tokens, reply_from):
    with torch.no_grad():
        logits = model(torch.tensor([tokens]), with_mtp=False)[0][0]
    picks = logits[reply_from - 1:len(tokens) - 1].argmax(-1).tolist()
    return "".join("." if p == t else "x" for p, t in zip(picks, tokens[reply_from:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=DEFAULT)
    ap.add_argument("--heldout", default=os.path.join(DEFAULT, "heldout.json"))
    ap.add_argument("--tasks", default="needle,prose_fact")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = checkpoint_io.load(args.checkpoint, torch.float32)
    with open(args.heldout) as f:
        examples = json.load(f)["examples"]
    for task in args.tasks.split(","):
        right = total = 0
        for e in (e for e in examples if e["task"] == task):
            m = marks(model, e["tokens"], e["reply_from"])
            right, total = right + m.count("."), total + len(m)
            print(f"{task:11s} {len(e['tokens']):5d} tokens  {m}  {chat.decode(e['tokens'][e['reply_from']:])!r}")
        print(f"{task:11s} {right} of {total} reply tokens right")
    return 0


if __name__ == "__main__":
    sys.exit(main())

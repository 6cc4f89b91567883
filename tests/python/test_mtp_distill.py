"""The distillation fine-tune's targets (tinyglm/train/finetune_mtp_distill.py) are the main model's
predictions of the token each draft row predicts.

1. pass_rows: row j of pass d (the rows mtp_chain.chain_loss scores, j = d-1 .. T-3) predicts
   t_{j+2}, so its target is the main model's logits at position j + 1 and its weight the one
   chain_loss gives that row; checked on logits that name their own position.
2. soft_ce is the cross entropy against the main model's distribution: with a one-hot teacher it is
   F.cross_entropy against that token; it is smallest when the student equals the teacher.
3. agreement counts weighted rows whose argmax is the main model's.

Skips when torch is not importable (CI has no torch).
Run: python3 test_mtp_distill.py [--bin-dir BUILD_DIR]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tinyglm", "train"))

try:
    import torch
    import torch.nn.functional as F
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def check_rows(distill):
    B, T, V, depth = 2, 12, 5, 3
    # main[b, p, :] holds p everywhere: each target names its position.
    main = torch.arange(T, dtype=torch.float32)[None, :, None].expand(B, T, V)
    weights = torch.arange(T, dtype=torch.float32)[None, :].expand(B, T) + 100
    failures = []
    for d, (rows, teacher, w) in enumerate(distill.pass_rows(depth, main, weights), start=1):
        js = list(range(T - 1))[rows]  # the pass's logits have T - 1 rows, one a position 0 .. T-2
        if js != list(range(d - 1, T - 2)):
            failures.append(f"pass {d}: rows {js}, want {d - 1} .. {T - 3}")
        got = [int(v) for v in teacher[0, :, 0]]
        if got != [j + 1 for j in js]:
            failures.append(f"pass {d}: targets from positions {got}, want {[j + 1 for j in js]}")
        # chain_loss weighs pass d's rows with weights[:, d:-1] (pass 1: [:, 1:-1]).
        if [int(v) - 100 for v in w[0]] != list(range(d, T - 1)):
            failures.append(f"pass {d}: weights of positions {[int(v) - 100 for v in w[0]]}")
    return failures


def check_losses(distill):
    torch.manual_seed(0)
    failures = []
    student = torch.randn(2, 7, 11)
    target = torch.randint(0, 11, (2, 7))
    one_hot = F.one_hot(target, 11).float() * 1e4  # softmax is the one-hot distribution
    w = torch.ones(2, 7)
    got = float(distill.soft_ce(student, one_hot, w))
    want = float(F.cross_entropy(student.reshape(-1, 11), target.reshape(-1)))
    if abs(got - want) > 1e-4 * max(1.0, abs(want)):
        failures.append(f"soft_ce against a one-hot teacher {got}, cross entropy {want}")
    teacher = torch.randn(2, 7, 11)
    if not float(distill.soft_ce(teacher, teacher, w)) < float(distill.soft_ce(student, teacher, w)):
        failures.append("soft_ce is not smallest at the teacher")
    w2 = torch.zeros(2, 7)
    w2[0, :3] = 1.0
    same = student.clone()
    same[0, 1] = -same[0, 1]  # row (0, 1) now disagrees unless its argmax was symmetric
    agree = distill.agreement(same, student, w2)
    want_agree = float((same[0, :3].argmax(-1) == student[0, :3].argmax(-1)).float().mean())
    if abs(agree - want_agree) > 1e-6 or distill.agreement(student, student, w2) != 1.0:
        failures.append(f"agreement {agree}, want {want_agree}")
    return failures


def main():
    if not HAVE_TORCH:
        print("SKIP: torch is not importable (pip install torch to check the distillation targets)")
        return 0
    import finetune_mtp_distill as distill
    failures = check_rows(distill) + check_losses(distill)
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS: each draft row's target is the main model's logits one position on; soft_ce and "
          "agreement as stated")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the tests of the training scripts share (test_extend_context.py, test_train_wide.py): a
file's sha256, and one short run of a script made twice, whose shards must be equal."""
import hashlib
import os


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_twice(run, work, shard):
    """run(out) -> CompletedProcess, into work/a and work/b. Returns (outs, shard sha256s, error):
    error is "" when both runs exited 0, else the failed run's exit code and output."""
    outs = [os.path.join(work, name) for name in ("a", "b")]
    for out in outs:
        proc = run(out)
        if proc.returncode != 0:
            return outs, None, f"exited {proc.returncode}:\n{proc.stdout}"
    shards = [sha256(os.path.join(out, shard)) for out in outs]
    print(f"[repeat] shard sha256 {shards[0][:16]} / {shards[1][:16]}")
    return outs, shards, ""

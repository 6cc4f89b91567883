"""A training run's training.json: its sources by sha256 and its paths relative to the repository,
so that the record names no machine's folders, and the file itself."""
import hashlib
import json
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def sources_sha256(paths):
    """{repository path: sha256} for the given repository paths."""
    out = {}
    for rel in paths:
        with open(os.path.join(ROOT, rel), "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def repo_path(path):
    """A path relative to the repository root when inside it, as given otherwise."""
    full = os.path.abspath(path)
    return os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else path


def derived_from(checkpoint, base):
    """A continued run's `derived_from`: the base checkpoint's path (as recorded) and identity."""
    return {"checkpoint": checkpoint, "shard_sha256": base["shard_sha256"],
            "weights_identity": base["weights_identity"]}


def write(out, record):
    """out/training.json, indented, with a final newline."""
    with open(os.path.join(out, "training.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")

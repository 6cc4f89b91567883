"""What a training run's training.json says about its inputs: the sources by sha256 and paths by
repository, so the record names no machine's folders."""
import hashlib
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

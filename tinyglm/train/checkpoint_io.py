"""Writes a TrainableGlm as the checkpoint directory the engine's loader reads, and reads one back.

Layout (tinyglm/checkpoint_writer.cpp, engine/model/tensor_layout.cpp): config.json with the engine's
fields, one shard model-00001-of-00001.safetensors (contiguous data, tensors in layout order) and
model.safetensors.index.json. Projections and the embedding are BF16 (rounded to nearest even from the
FP32 master weights), every other tensor F32. Routed experts are stored per expert
(`mlp.experts.{e}.{gate,up,down}_proj.weight`); the MTP block is layer num_hidden_layers. No
tokenizer.json: the engine uses the byte vocabulary for a 320-id model without one. The safetensors
writer is written here (no dependency) so the GPU machine needs only torch.
"""
import hashlib
import json
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python"))

from trainable_glm import TrainableGlm  # noqa: E402

SHARD = "model-00001-of-00001.safetensors"


def config_json(c):
    """The engine's config.json for a peer_config preset dict (checkpoint_writer.cpp's hf_config_json)."""
    j = {k: v for k, v in c.items()}
    L = c["num_hidden_layers"]
    j.update(architectures=["Glm5NextForCausalLM"], max_position_embeddings=1048576, n_group=1, topk_group=1,
             norm_topk_prob=True, scoring_func="sigmoid", topk_method="noaux_tc", num_nextn_predict_layers=1,
             num_key_value_heads=c["num_attention_heads"], pad_token_id=None, tie_word_embeddings=False,
             torch_dtype="bfloat16",
             mlp_layer_types=["dense" if i < c["first_k_dense_replace"] else "sparse" for i in range(L)])
    return dict(sorted(j.items()))


def stored_tensors(model):
    """(name, tensor on the CPU, dtype string) in layout order; experts split per expert."""
    W = {k: v.detach().cpu() for k, v in model.W.items()}
    out = []
    for name, shape, is_proj, _, _ in model.specs:
        t = W[name]
        dt = (torch.bfloat16, "BF16") if is_proj else (torch.float32, "F32")
        if ".experts." in name:
            stem, proj = name.rsplit(".", 1)
            out += [(f"{stem}.{e}.{proj}.weight", t[e].to(dt[0]), dt[1]) for e in range(t.shape[0])]
        else:
            out.append((name, t.to(dt[0]).reshape(shape), dt[1]))
    return out


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t, dtype in tensors:
        raw = bytes(t.contiguous().view(torch.uint8).flatten().tolist())  # no numpy needed
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    return offset


def export(model, directory, identity):
    """Writes config.json, the shard and its index into `directory` (created). identity: the
    `sparkglm_weights` metadata string (e.g. trained:seed=1,steps=900,data=tinyglm-curriculum/1).
    Returns the shard's sha256."""
    os.makedirs(directory, exist_ok=True)
    tensors = stored_tensors(model)
    total = write_safetensors(os.path.join(directory, SHARD), tensors, {"format": "pt", "sparkglm_weights": identity})
    index = {"metadata": {"total_size": total}, "weight_map": {n: SHARD for n, _, _ in tensors}}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config_json(model.c), f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, SHARD), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load(directory, dtype=torch.float64):
    """A TrainableGlm holding a checkpoint directory's weights (via reference_forward.load_checkpoint)."""
    import reference_forward as ref
    from peer_config import load_config
    c = load_config(directory)
    _, tensors = ref.load_checkpoint(directory)
    model = TrainableGlm(c, dtype=dtype)
    with torch.no_grad():
        for name, shape, _, _, _ in model.specs:
            if ".experts." in name:
                stem, proj = name.rsplit(".", 1)
                t = torch.stack([torch.from_numpy(tensors[f"{stem}.{e}.{proj}.weight"])
                                 for e in range(shape[0])])
            else:
                t = torch.from_numpy(tensors[name]).reshape(shape)
            model.W[name].copy_(t.to(dtype))
    return model

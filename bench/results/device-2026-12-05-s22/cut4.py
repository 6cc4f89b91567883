"""Cuts a tinyglm-wide checkpoint to its first four layers (KDA, KDA, KDA, MLA) plus its MTP layer:
a diagnostic for whether a GPU mismatch needs the second MLA layer (session 22, call 4).

  python3 bench/results/device-2026-12-05-s22/cut4.py SRC DST
"""
import json
import re
import struct
import sys

SHARD = "model-00001-of-00001.safetensors"


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(f"{src}/{SHARD}", "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, body = json.loads(raw[8:8 + n]), raw[8 + n:]
    kept, blobs, offset = {}, [], 0
    for name, meta in header.items():
        if name == "__metadata__":
            kept[name] = meta
            continue
        m = re.match(r"model\.layers\.(\d+)\.(.*)", name)
        if m and 4 <= int(m.group(1)) <= 7:
            continue  # layers 4-7 go
        if m and int(m.group(1)) == 8:
            name = f"model.layers.4.{m.group(2)}"  # the MTP layer follows the main ones
        begin, end = meta["data_offsets"]
        kept[name] = {"dtype": meta["dtype"], "shape": meta["shape"], "data_offsets": [offset, offset + end - begin]}
        blobs.append(body[begin:end])
        offset += end - begin
    head = json.dumps(kept).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(f"{dst}/{SHARD}", "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    with open(f"{src}/model.safetensors.index.json") as f:
        index = json.load(f)
    index["weight_map"] = {k: SHARD for k in kept if k != "__metadata__"}
    index.get("metadata", {}).pop("total_size", None)
    with open(f"{dst}/model.safetensors.index.json", "w") as f:
        json.dump(index, f)
    with open(f"{src}/config.json") as f:
        c = json.load(f)
    c["num_hidden_layers"] = 4
    c["layer_types"], c["mlp_layer_types"] = c["layer_types"][:4], c["mlp_layer_types"][:4]
    with open(f"{dst}/config.json", "w") as f:
        json.dump(c, f, indent=1)


if __name__ == "__main__":
    main()

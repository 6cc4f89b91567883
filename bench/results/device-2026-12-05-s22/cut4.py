# Cuts a tinyglm-wide checkpoint to its first four layers (one MLA layer) plus its MTP layer: a
# diagnostic for whether a GPU mismatch needs two MLA layers.
import json, struct, re, sys
src, dst = sys.argv[1], sys.argv[2]
raw = open(f"{src}/model-00001-of-00001.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]; hdr = json.loads(raw[8:8 + n]); body = raw[8 + n:]
out, blobs, off = {}, [], 0
for name, meta in hdr.items():
    if name == "__metadata__": out[name] = meta; continue
    m = re.match(r"model\.layers\.(\d+)\.(.*)", name)
    if m:
        i = int(m.group(1))
        if 4 <= i <= 7: continue
        if i == 8: name = f"model.layers.4.{m.group(2)}"
    b, e = meta["data_offsets"]; data = body[b:e]
    out[name] = {"dtype": meta["dtype"], "shape": meta["shape"], "data_offsets": [off, off + len(data)]}
    blobs.append(data); off += len(data)
h = json.dumps(out).encode(); h += b" " * ((8 - len(h) % 8) % 8)
with open(f"{dst}/model-00001-of-00001.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(x) for x in blobs]
idx = json.load(open(f"{src}/model.safetensors.index.json"))
idx["weight_map"] = {k: "model-00001-of-00001.safetensors" for k in out if k != "__metadata__"}
idx.get("metadata", {}).pop("total_size", None)
json.dump(idx, open(f"{dst}/model.safetensors.index.json", "w"))
c = json.load(open(f"{src}/config.json"))
c["num_hidden_layers"] = 4; c["layer_types"] = c["layer_types"][:4]; c["mlp_layer_types"] = c["mlp_layer_types"][:4]
json.dump(c, open(f"{dst}/config.json", "w"), indent=1)

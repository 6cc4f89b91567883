"""The tinyGLM forward with serving caches: prefill of one sequence in chunks, decode of a batch.

Mirrors reference_forward.forward (embedding copied into hc streams, per layer an attn site and an ffn
site, head reduction, final norm, LM head) with the blocks of peer_kda, peer_mla and peer_moe.
Prefill calls its pieces through `self.piece`, which tinyglm_torch.py may replace by torch.compile'd
versions; the decode step is one function, compiled whole.
"""
import torch

import peer_kda as kda
import peer_mhc as mhc
import peer_mla as mla
import peer_moe as moe
from peer_config import KDA_KIND


class BatchCache:
    """Per-sequence state for `batch` sequences of up to `capacity` tokens.
    kda_state [B, H, K, V] FP32 and kda_conv [B, taps-1, 3*H*K] FP32 per KDA layer;
    ckv [B, cap, kv_lora], kidx [B, cap, dI] (projection dtype) and kgate [B, cap] FP32 per MLA layer."""

    def __init__(self, c, batch, capacity, device, proj_dtype, float_dtype):
        kp = c["index_kpool"]
        capacity = -(-capacity // kp) * kp
        la = c["linear_attn_config"]
        H, K, taps = la["num_heads"], la["head_dim"], la["short_conv_kernel_size"]
        z = lambda *shape, dtype=float_dtype: torch.zeros(shape, dtype=dtype, device=device)
        self.kda_state, self.kda_conv, self.ckv, self.kidx, self.kgate = {}, {}, {}, {}, {}
        for i, kind in enumerate(c["layer_types"]):
            if kind == KDA_KIND:
                self.kda_state[i] = z(batch, H, K, K)
                self.kda_conv[i] = z(batch, taps - 1, 3 * H * K)
            else:
                self.ckv[i] = z(batch, capacity, c["kv_lora_rank"], dtype=proj_dtype)
                self.kidx[i] = z(batch, capacity, c["index_head_dim"], dtype=proj_dtype)
                self.kgate[i] = z(batch, capacity)
        self.lengths = torch.zeros(batch, dtype=torch.int64, device=device)    # tokens cached, per sequence
        self.host_lengths = [0] * batch
        self.capacity = capacity

    def tensors(self):
        return [*self.kda_state.values(), *self.kda_conv.values(), *self.ckv.values(), *self.kidx.values(),
                *self.kgate.values(), self.lengths]


class TinyGlm:
    def __init__(self, c, W, proj_dtype, float_dtype):
        self.c, self.W, self.pd, self.fd = c, dict(W), proj_dtype, float_dtype
        for i, kind in enumerate(c["layer_types"]):  # fused q/k/v projection and conv (a layout choice)
            a = f"model.layers.{i}.self_attn."
            if kind == KDA_KIND:
                self.W[a + "qkv_proj.weight"] = torch.cat([self.W.pop(a + f"{n}_proj.weight") for n in "qkv"])
                self.W[a + "qkv_conv1d.weight"] = torch.cat(
                    [self.W.pop(a + f"{n}_conv1d.weight") for n in "qkv"]).to(float_dtype)
        self.piece = {"hc_coefficients": mhc.hc_coefficients, "hc_combine": mhc.hc_combine,
                      "kda_project": kda.kda_project, "kda_chunk_prepare": kda.kda_chunk_prepare,
                      "kda_output": kda.kda_output, "mla_project": mla.mla_project,
                      "mla_output": mla.mla_output, "dense_mlp": moe.dense_mlp, "moe_route": moe.moe_route,
                      "expert": moe.swiglu, "head": self._head}
        self.mla_block = 512          # queries per attention block in prefill (bounds the temporaries)

    def new_cache(self, batch, capacity, device):
        return BatchCache(self.c, batch, capacity, device, self.pd, self.fd)

    # ---- shared pieces -------------------------------------------------------------------------
    def _site(self, X, i, site, block, coeff=mhc.hc_coefficients, combine=mhc.hc_combine):
        c, W, p = self.c, self.W, f"model.layers.{i}."
        pre, post, comb = coeff(X, W[p + f"hc_{site}_fn"], W[p + f"hc_{site}_base"], W[p + f"hc_{site}_scale"],
                                c["rms_norm_eps"], c["hc_eps"], c["hc_sinkhorn_iters"])
        norm = "input_layernorm.weight" if site == "attn" else "post_attention_layernorm.weight"
        x = mhc.rms_norm(mhc.hc_reduce(X, pre), W[p + norm], c["rms_norm_eps"])
        return combine(X, block(x), post, comb)

    def _head(self, X):
        c, W = self.c, self.W
        h = mhc.hc_head(X, W["model.hc_head_fn"], W["model.hc_head_base"], W["model.hc_head_scale"],
                        c["rms_norm_eps"], c["hc_eps"])
        return mhc.linear(mhc.rms_norm(h, W["model.norm.weight"], c["rms_norm_eps"]), W["lm_head.weight"])

    def _embed(self, tokens):
        X = self.W["model.embed_tokens.weight"][tokens].to(self.fd)              # [T, D]
        return X[:, None, :].expand(-1, self.c["hc_mult"], -1).contiguous()     # [T, hc, D]

    def _ffn(self, x, i, moe_impl):
        m = f"model.layers.{i}.mlp."
        if i < self.c["first_k_dense_replace"]:
            return self.piece["dense_mlp"](x, self.W, m) if moe_impl == "loop" else moe.dense_mlp(x, self.W, m)
        if moe_impl == "dense":
            return moe.moe_dense(x, self.W, m, self.c)
        return moe.moe_loop(x, self.W, m, self.c, route=self.piece["moe_route"], expert=self.piece["expert"])

    # ---- prefill: one sequence, tokens appended at its current length ----------------------------
    def prefill(self, tokens, cache, b, chunk=8192):
        """tokens [T] on the device; returns the last position's logits [vocab]."""
        logits = None
        for s in range(0, tokens.shape[0], chunk):
            logits = self._prefill_chunk(tokens[s:s + chunk], cache, b)
        return logits[-1]

    def _prefill_chunk(self, tokens, cache, b):
        c, P = self.c, self.piece
        start, T = cache.host_lengths[b], tokens.shape[0]
        if start + T > cache.capacity:
            raise ValueError(f"prefill of {T} tokens at {start} exceeds the cache capacity {cache.capacity}")
        X = self._embed(tokens)
        for i, kind in enumerate(c["layer_types"]):
            a = f"model.layers.{i}.self_attn."
            if kind == KDA_KIND:
                block = lambda x: self._kda_prefill(x, a, cache, i, b)
            else:
                block = lambda x: self._mla_prefill(x, a, cache, i, b, start)
            X = self._site(X, i, "attn", block, P["hc_coefficients"], P["hc_combine"])
            X = self._site(X, i, "ffn", lambda x: self._ffn(x, i, "loop"), P["hc_coefficients"], P["hc_combine"])
        cache.host_lengths[b] = start + T
        cache.lengths[b] = start + T
        return P["head"](X[-1:])

    def _kda_prefill(self, x, a, cache, i, b):
        la = self.c["linear_attn_config"]
        q, k, v, g, beta, gate, hist = self.piece["kda_project"](x[None], self.W, a, la, cache.kda_conv[i][b:b + 1])
        o, S = kda.kda_chunked(q[0], k[0], v[0], g[0], beta[0], cache.kda_state[i][b],
                               prepare=self.piece["kda_chunk_prepare"])
        cache.kda_conv[i][b].copy_(hist[0])
        cache.kda_state[i][b].copy_(S)
        return self.piece["kda_output"](o[None], gate, self.W, a, self.c["rms_norm_eps"])[0]

    def _mla_prefill(self, x, a, cache, i, b, start):
        c, T = self.c, x.shape[0]
        q_abs, c_kv, qI, w, kI, gate = self.piece["mla_project"](x[None], self.W, a, c)
        ckv, kidx, kgate = cache.ckv[i][b], cache.kidx[i][b], cache.kgate[i][b]
        ckv[start:start + T] = c_kv[0].to(ckv.dtype)
        kidx[start:start + T] = kI[0].to(kidx.dtype)
        kgate[start:start + T] = gate[0]
        ape = self.W[a + "indexer.kpool_compress_ape"]
        o_bar = mla.mla_prefill_attend(q_abs[0], qI[0], w[0], ckv, kidx, kgate, ape, start, c, self.mla_block)
        return self.piece["mla_output"](o_bar, self.W, a, c, self.fd)

    # ---- decode: one new token for each of the cache's sequences ---------------------------------
    def decode_step(self, tokens, cache_tensors, sparse: bool, moe_impl: str):
        """tokens [B]; cache_tensors = BatchCache.tensors() (flat, so torch.compile sees plain tensors).
        Updates the caches in place and advances the lengths; returns logits [B, vocab]."""
        c, W = self.c, self.W
        kinds = c["layer_types"]
        n_kda = sum(k == KDA_KIND for k in kinds)
        n_mla = len(kinds) - n_kda
        it = iter(cache_tensors)
        states = [next(it) for _ in range(n_kda)]
        convs = [next(it) for _ in range(n_kda)]
        ckvs, kidxs, kgates = ([next(it) for _ in range(n_mla)] for _ in range(3))
        lengths = next(it)
        B = tokens.shape[0]
        rows = torch.arange(B, device=tokens.device)
        X = self._embed(tokens)                                                  # [B, hc, D]
        ki = mi = 0
        for i, kind in enumerate(kinds):
            a = f"model.layers.{i}.self_attn."
            if kind == KDA_KIND:
                def block(x, a=a, s=states[ki], cv=convs[ki]):
                    q, k, v, g, beta, gate, hist = kda.kda_project(x[:, None], W, a, c["linear_attn_config"], cv)
                    o, S = kda.kda_recurrent_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], s)
                    cv.copy_(hist)
                    s.copy_(S)
                    return kda.kda_output(o[:, None], gate, W, a, c["rms_norm_eps"])[:, 0]
                ki += 1
            else:
                def block(x, a=a, ckv=ckvs[mi], kidx=kidxs[mi], kgate=kgates[mi]):
                    q_abs, c_kv, qI, w, kI, gate = mla.mla_project(x[:, None], W, a, c)
                    ckv.index_put_((rows, lengths), c_kv[:, 0].to(ckv.dtype))
                    kidx.index_put_((rows, lengths), kI[:, 0].to(kidx.dtype))
                    kgate.index_put_((rows, lengths), gate[:, 0])
                    o_bar = mla.mla_decode_attend(q_abs[:, 0], qI[:, 0], w[:, 0], ckv, kidx, kgate,
                                                  W[a + "indexer.kpool_compress_ape"], lengths + 1, c, sparse)
                    return mla.mla_output(o_bar, W, a, c, self.fd)
                mi += 1
            X = self._site(X, i, "attn", block)
            X = self._site(X, i, "ffn", lambda x, i=i: self._ffn(x, i, moe_impl))
        lengths.add_(1)
        return self._head(X)

    def decode(self, tokens, cache, step=None, moe_impl="loop"):
        """Host wrapper: picks the dense or sparse MLA path from the host-side lengths, calls `step`
        (decode_step or a compiled version of it) and advances the host lengths."""
        if max(cache.host_lengths) + 1 > cache.capacity:
            raise ValueError("decode past the cache capacity")
        sparse = max(cache.host_lengths) + 1 > mla.dense_limit(self.c)
        logits = (step or self.decode_step)(tokens, cache.tensors(), sparse, moe_impl)
        cache.host_lengths = [n + 1 for n in cache.host_lengths]
        return logits

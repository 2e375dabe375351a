"""Collective communication times: a latency term and a bandwidth term per algorithm.

Bandwidth terms follow nccl-tests' bus-bandwidth definition (doc/PERFORMANCE.md): a ring
all-reduce of S bytes over n ranks moves 2(n−1)/n·S through each rank's link; reduce-scatter and
all-gather (n−1)/n·S; all-to-all (n−1)/n·S; the link rates here are already the achievable
(busbw) fraction of the line rate. Latency follows NCCL's own tuning model (src/graph/tuning.cc,
`ncclTopoTuneModel`): a ring over n ranks on N nodes takes n−1 steps (all-gather, reduce-scatter)
or 2(n−1) (all-reduce), of which N−1 (2(N−1)) cross the network at the network hop's latency and
the rest stay in a node at the scale-up hop's; NCCL's tree all-reduce takes 2·((k−1) intra-node +
log2 N network) hops. All-reduce takes the faster of the two, as NCCL's tuner picks per size;
all-gather and reduce-scatter only have the ring (NCCL ≤ 2.22; the tree-like PAT algorithm of 2.23
serves one GPU per node only), so their latency grows with the group: ~n·3 µs over NVLink hops,
8 ms on 2,048 GPUs with the Simple protocol (rings take the fastest of NCCL's Simple, LL128 and LL
protocols for the message, `RING_PROTOCOLS`). Each collective also pays a fixed launch/sync
overhead. Group layout follows Megatron-LM's rank order (tp fastest, then cp, dp/ep, then pp), so
a group of stride `stride` and size `n` has min(n, gpus_per_node/stride) ranks per node. All
arguments may be numpy arrays.
"""

from __future__ import annotations

import numpy as np

from trainrig.estimate import ops

__all__ = ["ring_steps", "allreduce_time_s", "reduce_scatter_time_s", "all_gather_time_s",
           "all_to_all_time_s", "copies_time_s", "p2p_time_s", "GroupLinks"]


class GroupLinks:
    """The links one communication group uses, from its size and rank stride."""

    def __init__(self, size, stride, x, p):
        self.size = size
        # "nodes" here are scale-up fabrics: a node, or the nodes of an NVL72 rack that NVLink joins
        per_node = ops.maximum(ops.floor(x.fabric_gpus / stride), 1.0)
        # a group can never span more fabrics than the job has (a strided group on one node)
        self.nodes = ops.minimum(ops.ceil(size / ops.minimum(size, per_node)), x.n_fabrics)
        self.ranks_per_node = size / self.nodes
        # past the scale-up domain (bridged pairs), ring traffic crosses PCIe between domains
        self.intra_gbs = ops.where(self.ranks_per_node <= x.scale_up_domain, x.intra_bandwidth_gbs, x.pcie_peer_gbs)
        self.intra_latency_s = x.intra_latency_us * 1e-6
        # every GPU of a node communicates at once (parallel groups), sharing the node's ports
        self.inter_gbs_per_gpu = x.inter_node_bandwidth_gbs / x.gpus_per_node
        self.inter_latency_s = x.inter_latency_us * 1e-6
        self.overhead_s = p.collective_overhead_us * 1e-6
        self.spans_nodes = self.nodes > 1


def ring_steps(n):
    return ops.maximum(n - 1, 0.0)


def _tree_hops(n):
    return 2 * ops.ceil(ops.log2(ops.maximum(n, 1.0)))


def _allreduce_bandwidth_s(nbytes, g: GroupLinks):
    """The bandwidth part of an all-reduce: reduce-scatter in the node, all-reduce across nodes of
    each rank's 1/k shard (all ranks' NICs in parallel), all-gather in the node. A multi-channel
    ring moves the same bytes: each of a node's NICs carries its channels' share."""
    k, nodes = g.ranks_per_node, g.nodes
    intra = 2 * ring_steps(k) / k * nbytes / (g.intra_gbs * 1e9)
    if type(g.spans_nodes) is not np.ndarray and not g.spans_nodes:
        return intra  # one node: no network share to compute
    inter = 2 * ring_steps(nodes) / nodes * (nbytes / k) / (g.inter_gbs_per_gpu * 1e9)
    return intra + ops.where(g.spans_nodes, inter, 0.0)


# NCCL's protocols for ring collectives (src/graph/tuning.cc): (intra-node hop latency, network hop
# latency, bandwidth), each relative to Simple's. LL128: hwLat 1.9 vs 3.4 µs (NVLink), 4.0 vs 9.6 µs
# (network), busBw × 0.92; LL: 0.47 × 1.8 (multi-node) vs 3.4 µs, 2.7 vs 9.6 µs, busBw / 4. The tuner
# takes whichever finishes first for the message: LL for small ones, Simple for large.
RING_PROTOCOLS = ((1.0, 1.0, 1.0), (1.9 / 3.4, 4.0 / 9.6, 0.92), (0.47 * 1.8 / 3.4, 2.7 / 9.6, 0.25))


def _ring_s(bandwidth_s, g: GroupLinks, passes: float = 1.0):
    """A ring collective whose traffic takes `bandwidth_s` at Simple's rate, at the fastest protocol;
    each of its `passes` trips (1: all-gather or reduce-scatter, 2: all-reduce) takes n−N hops inside
    nodes and N−1 across the network (NCCL tuning.cc `nInterSteps`)."""
    intra = passes * (g.size - g.nodes) * g.intra_latency_s
    inter = passes * ops.where(g.spans_nodes, ring_steps(g.nodes) * g.inter_latency_s, 0.0)
    latencies = [intra * a + inter * b for a, b, _ in RING_PROTOCOLS]
    if type(bandwidth_s) is np.ndarray and not any(type(v) is np.ndarray for v in latencies):
        # Simple is fastest once its bandwidth saving outweighs the other protocols' lower latency;
        # past that size for every row (the usual case: gradients, weights, activations) no other
        # protocol needs timing. NaN fails the test and takes the full path.
        simple_wins_from = max((latencies[0] - latency) / (1 / bw - 1) for (_, _, bw), latency in
                               zip(RING_PROTOCOLS[1:], latencies[1:], strict=True))
        if bandwidth_s.min() > simple_wins_from:
            return bandwidth_s + latencies[0]
    times = [bandwidth_s / bw + latency for (_, _, bw), latency in zip(RING_PROTOCOLS, latencies, strict=True)]
    return ops.minimum(ops.minimum(times[0], times[1]), times[2])


def allreduce_time_s(nbytes, g: GroupLinks):
    """All-reduce: the faster of NCCL's tree (2(k−1) hops in the node, 2·log2 N across nodes) and
    its ring (2(n−1) hops), both at the bandwidth of the hierarchical traffic."""
    k = g.ranks_per_node
    bandwidth = _allreduce_bandwidth_s(nbytes, g)
    tree = (2 * ring_steps(k) * g.intra_latency_s
            + ops.where(g.spans_nodes, _tree_hops(g.nodes) * g.inter_latency_s, 0.0))
    best = ops.minimum(bandwidth + tree, _ring_s(bandwidth, g, 2.0))
    return ops.where(g.size > 1, best + g.overhead_s, 0.0)


def reduce_scatter_time_s(nbytes, g: GroupLinks):
    """Reduce-scatter of S bytes (each rank ends with S/n): half an all-reduce's traffic, one trip
    around NCCL's ring (its only algorithm for reduce-scatter across nodes)."""
    return ops.where(g.size > 1, _ring_s(_allreduce_bandwidth_s(nbytes, g) / 2, g) + g.overhead_s, 0.0)


def all_gather_time_s(nbytes, g: GroupLinks):
    """All-gather to S bytes on every rank: the same traffic and ring as a reduce-scatter."""
    return reduce_scatter_time_s(nbytes, g)


def all_to_all_time_s(nbytes, g: GroupLinks):
    """All-to-all where each rank holds S bytes: (n−1)/n·S leave it; the share bound for other
    nodes crosses the network."""
    n, k = g.size, g.ranks_per_node
    return copies_time_s(nbytes, (k - 1) / n, (n - k) / n, g)


def copies_time_s(nbytes, local_copies, remote_copies, g: GroupLinks):
    """An exchange in which each rank sends `local_copies` × S bytes to ranks of its own node and
    `remote_copies` × S over the network, every rank at once: the slower of the two sides, plus the
    latency of a hop to each other rank of the node and, across nodes, to each other node."""
    n, k = g.size, g.ranks_per_node
    local = local_copies * nbytes / (g.intra_gbs * 1e9)
    remote = remote_copies * nbytes / (g.inter_gbs_per_gpu * 1e9)
    remote = ops.where(g.spans_nodes, remote + g.inter_latency_s * ring_steps(g.nodes), 0.0)
    return ops.where(n > 1, ops.maximum(local, remote) + ring_steps(k) * g.intra_latency_s + g.overhead_s, 0.0)


def p2p_time_s(nbytes, across_nodes, x, p):
    """One point-to-point send between pipeline neighbours."""
    inter = nbytes / (x.inter_node_bandwidth_gbs / x.gpus_per_node * 1e9) + x.inter_latency_us * 1e-6
    intra = nbytes / (x.intra_bandwidth_gbs * 1e9) + x.intra_latency_us * 1e-6
    return ops.where(across_nodes, inter, intra) + p.collective_overhead_us * 1e-6

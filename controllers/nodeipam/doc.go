// Package nodeipam is kube-controller-manager's node-ipam-controller,
// native, with its range allocator: every node gets a pod CIDR cut from
// the cluster CIDR (one per IP family in a dual-stack cluster), written to
// spec.podCIDR and spec.podCIDRs, and a deleted node's CIDRs go back to
// the pool.
//
// Guarantees, as KCM v1.37 does it:
//   - names: node-ipam-controller, alias nodeipam; thirty workers; its
//     client is KCM's "node-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps); events come from source component "cidrAllocator";
//   - flags, with KCM's names and defaults: --allocate-node-cidrs (false),
//     --cluster-cidr (""), --cidr-allocator-type (RangeAllocator),
//     --service-cluster-ip-range (""), --node-cidr-mask-size,
//     --node-cidr-mask-size-ipv4, --node-cidr-mask-size-ipv6 (0: unset;
//     24 for IPv4 and 64 for IPv6 are then used). In KCM the first three
//     belong to the shared "generic" flag group, the others to the
//     controller's own;
//   - with --allocate-node-cidrs false the controller does not start (the
//     host reports it not started) and the other flags are ignored, except
//     that --service-cluster-ip-range may hold at most two entries;
//   - --cluster-cidr is one CIDR or two of different families; the mask
//     flags are combined as KCM does (--node-cidr-mask-size is refused
//     with two cluster CIDRs, and beside a per-family flag; the per-family
//     flag of the family the single-stack cluster does not have is
//     refused); a node mask smaller than the cluster CIDR's, or cutting an
//     IPv6 cluster CIDR into more than 2^16 blocks, is refused;
//   - the node CIDRs overlapping a Service CIDR (both entries of
//     --service-cluster-ip-range) are never handed out;
//   - before allocating, the CIDRs every node holds are marked used; a
//     node holding one that does not parse, or lies outside the cluster
//     CIDR of its index, stops the controller with an error naming it
//     (KCM cannot start either);
//   - a node without podCIDRs gets the next free block of each cluster
//     CIDR, from a candidate that moves on past every allocation: a
//     released block is handed out again only once the candidate has gone
//     round the range (KCM's cidrset). The write is a strategic-merge
//     patch of spec.podCIDR and spec.podCIDRs, tried three times; then a
//     CIDRAssignmentFailed event, the blocks are released (unless the
//     error was a server timeout: the write may have happened) and the
//     node is retried with back-off;
//   - when a cluster CIDR is exhausted the node gets a Normal
//     CIDRNotAvailable event ("Node <name> status is now:
//     CIDRNotAvailable") and is retried with back-off, without end; no
//     node condition is written (KCM's range allocator writes none);
//   - a node's CIDRs are released when its deletion is observed, in the
//     same event handler that queues other nodes, so a node added after a
//     deletion sees the released blocks; a node being deleted is skipped;
//   - every add and update of a node queues it, as in KCM; of a cached node
//     it reads only spec.podCIDR, spec.podCIDRs and metadata (declared
//     with WithReads, so the host may prune the rest).
//
// Differences from KCM:
//   - --secondary-service-cluster-ip-range does not exist in KCM either:
//     the second entry of --service-cluster-ip-range is the secondary
//     Service CIDR, here as there;
//   - an unparsable --service-cluster-ip-range entry, or two entries of
//     one family, is an error naming the flag when allocating (KCM only
//     logs the parse error, and then allocates Service addresses to pods);
//     so is a node mask larger than the address length;
//   - --cidr-allocator-type CloudAllocator, IPAMFromCluster or IPAMFromCloud
//     is refused at build time naming the flag (KCM fails when the
//     controller starts; none can run in v1.37 without a cloud provider);
//   - the flags are checked when the host is built (manager.Builder.Build)
//     rather than when the controller starts; the CIDRs nodes hold are
//     read from the synced cache rather than from a LIST of its own;
//   - in a dual-stack cluster, when the second family is exhausted the
//     block just taken from the first is released (KCM keeps it, leaking
//     one block per retry); likewise when the node vanished between the
//     allocation and the write;
//   - a node synced again before the cache shows this controller's own
//     write waits for it (the kit's staleness guard) instead of allocating
//     a second set of CIDRs that the API server would refuse;
//   - KCM's cidrset metrics (node_ipam_controller_cidrset_*) are not
//     exported.
//
// Not sharded: the blocks of a cluster CIDR are one bitmap every node's
// allocation reads and writes; split, two instances would hand out the
// same block.
//
// Non-guarantees: which node gets which block when several nodes lack
// CIDRs at once depends on the order thirty workers take them, as in KCM.
// Blocks are tracked in memory: a write that timed out keeps its blocks
// taken until the controller restarts, as in KCM.
package nodeipam

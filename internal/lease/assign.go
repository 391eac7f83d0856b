package lease

import (
	"slices"
	"sort"
)

// normalizeLive returns the live node ids sorted and deduplicated, with the
// empty id (which means "unowned") removed. The input is not modified.
func normalizeLive(live []string) []string {
	nodes := make([]string, 0, len(live))
	for _, id := range live {
		if id != "" {
			nodes = append(nodes, id)
		}
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// AssignPartitions returns the owner of each partition 0..n-1 (n == len(prev))
// given the previous owners (prev[i] == "" means unowned, or the owner may no
// longer be alive) and the live nodes.
//
// Guarantees:
//   - when at least one node is live every partition gets a live owner;
//     when none is live every entry is "";
//   - balanced: every live node owns floor(n/k) or ceil(n/k) partitions, so
//     per-node counts differ by at most 1;
//   - sticky and minimal: a partition whose previous owner is still live keeps
//     it unless that owner holds more than its quota. The n%k "+1" quotas go to
//     the nodes that already hold the most partitions, so the number of moves
//     equals the lower bound
//     orphans + sum over live nodes of max(0, kept - quota);
//   - deterministic: the result depends only on prev and the set of live ids
//     (order and duplicates in live are irrelevant).
//
// Freed partitions (orphans and the excess shed by over-quota nodes) go to the
// least-loaded nodes that are below their quota, in runs of consecutive
// partitions. The function is O(n + k log k); prev is not modified.
func AssignPartitions(prev []string, live []string) []string {
	n := len(prev)
	next := make([]string, n)
	nodes := normalizeLive(live)
	k := len(nodes)
	if k == 0 || n == 0 {
		return next
	}

	index := make(map[string]int, k)
	for i, id := range nodes {
		index[id] = i
	}

	// kept[j] = partitions whose previous owner is nodes[j].
	kept := make([]int, k)
	for _, owner := range prev {
		if j, ok := index[owner]; ok {
			kept[j]++
		}
	}

	// Quotas: base for everyone, +1 for the n%k nodes that already hold the
	// most (ties broken by node id, which is the order of nodes). Giving the
	// +1 to the largest holders is what minimises sum(max(0, kept-quota)).
	base, extra := n/k, n%k
	quota := make([]int, k)
	order := make([]int, k)
	for j := range order {
		quota[j] = base
		order[j] = j
	}
	if extra > 0 {
		sort.SliceStable(order, func(a, b int) bool { return kept[order[a]] > kept[order[b]] })
		for _, j := range order[:extra] {
			quota[j]++
		}
	}

	// Keep partitions (lowest index first) while the owner is under quota.
	count := make([]int, k)
	free := make([]int, 0, n)
	for i, owner := range prev {
		if j, ok := index[owner]; ok && count[j] < quota[j] {
			next[i] = owner
			count[j]++
			continue
		}
		free = append(free, i)
	}
	if len(free) == 0 {
		return next
	}

	// Hand the freed partitions out in runs: the least-loaded node below
	// its quota takes the next consecutive freed partitions up to its
	// quota, then the next node. A node's new partitions are neighbours,
	// which on Citus means they sit on few workers (citus_split_partitions
	// places partitions on workers in contiguous blocks). The total deficit
	// equals len(free), so every node ends exactly at its quota.
	below := make([]int, 0, k)
	for j := range k {
		if count[j] < quota[j] {
			below = append(below, j)
		}
	}
	sort.SliceStable(below, func(a, b int) bool {
		x, y := below[a], below[b]
		if count[x] != count[y] {
			return count[x] < count[y]
		}
		return nodes[x] < nodes[y]
	})
	f := 0
	for _, j := range below {
		for ; count[j] < quota[j]; f++ {
			next[free[f]] = nodes[j]
			count[j]++
		}
	}
	return next
}

// Moves counts the partitions whose owner differs between prev and next
// (i where prev[i] != next[i]). If the slices differ in length, the extra
// entries of the longer one each count as a move.
func Moves(prev, next []string) int {
	m := 0
	for i := range max(len(prev), len(next)) {
		var a, b string
		if i < len(prev) {
			a = prev[i]
		}
		if i < len(next) {
			b = next[i]
		}
		if a != b {
			m++
		}
	}
	return m
}

// AssignBackups returns node -> backup node for the live nodes, given the
// previous assignment. The backup of a node serves that node's work when it
// dies.
//
// With 0 or 1 live nodes the result is empty (a node never backs up itself).
// With k >= 2 live nodes the result is a derangement of the live nodes: a
// permutation without fixed points, so every node has exactly one backup that
// is not itself and every backup serves exactly one node (all loads are 1,
// which satisfies "most backups serve one node, none serves more than two").
//
// Minimal change: every previous pair node -> backup where both are live and
// no other kept pair already uses that backup is kept. Of several previous
// pairs sharing one backup, the one from the smallest node id is kept. The
// kept pairs form disjoint cycles and paths; the paths are linked tail to head
// into one ring, so only the tails (nodes whose backup died, is new, is itself,
// or was shared) get a new backup. The only exception is a single lone node
// with every other node already in kept cycles: then one kept pair a -> b is
// split into a -> lone -> b, changing exactly one extra node. That is
// unavoidable (the lone node needs someone to back it up), so the number of
// changed nodes is the minimum possible.
//
// Consequences when prev was produced by AssignBackups (a single cycle through
// all previously live nodes, see the tests): after one node leaves only its
// predecessor changes backup; after one node joins at most one existing node
// changes backup. For an arbitrary previous derangement (possibly several
// cycles) a leave changes at most two nodes and a join at most one.
//
// The result is deterministic: it depends only on prev and the set of live
// ids. prev is not modified. O(k log k).
func AssignBackups(prev map[string]string, live []string) map[string]string {
	nodes := normalizeLive(live)
	k := len(nodes)
	next := make(map[string]string, k)
	if k < 2 {
		return next
	}
	index := make(map[string]int, k)
	for i, id := range nodes {
		index[id] = i
	}

	// Kept edges: out[i] = j means nodes[i] -> nodes[j]; -1 means none.
	// in[j] = i is the unique kept edge into nodes[j]. Iterating nodes in
	// sorted order makes the smallest id win a shared backup.
	out := make([]int, k)
	in := make([]int, k)
	for i := range k {
		out[i], in[i] = -1, -1
	}
	// dropped[i] = j records a valid previous pair that was dropped only
	// because backup j was already taken.
	dropped := make([]int, k)
	for i, id := range nodes {
		dropped[i] = -1
		b, ok := prev[id]
		if !ok {
			continue
		}
		j, ok := index[b]
		if !ok || j == i {
			continue
		}
		if in[j] != -1 {
			dropped[i] = j
			continue
		}
		out[i], in[j] = j, i
	}

	// Decompose the kept edges into paths. Heads have no incoming edge;
	// nodes on cycles are never reached from a head and are left alone.
	// Heads are visited in sorted order, so the ring order is deterministic.
	var heads, tails []int
	for h := range k {
		if in[h] != -1 {
			continue
		}
		t := h
		for out[t] != -1 {
			t = out[t]
		}
		heads = append(heads, h)
		tails = append(tails, t)
	}

	switch {
	case len(heads) == 0:
		// Every node kept its backup: nothing to do.
	case len(heads) > 1 || heads[0] != tails[0]:
		// Link tail of path p to head of path p+1 (cyclically). With more
		// than one path the ends belong to different paths; with one path
		// of length >= 2 head != tail. Either way no self-backup.
		for p, t := range tails {
			h := heads[(p+1)%len(heads)]
			out[t], in[h] = h, t
		}
	default:
		// A single lone node x; all others are on kept cycles.
		x := heads[0]
		if j := dropped[x]; j != -1 {
			// x lost its previous backup j only to a tie-break: give it
			// back and let the former holder y take x instead (one change).
			y := in[j]
			out[x], in[j] = j, x
			out[y], in[x] = x, y
		} else {
			// Split the kept edge a -> b out of the smallest node a:
			// a -> x -> b (a changes, x is new to the ring anyway).
			a := 0
			if a == x {
				a = 1
			}
			b := out[a]
			out[a], in[x] = x, a
			out[x], in[b] = b, x
		}
	}

	for i, j := range out {
		next[nodes[i]] = nodes[j]
	}
	return next
}

//! Filling one slot of every chain (the active, or one replica) within per-node quotas, at the
//! least cost: a min-cost bipartite assignment of vbuckets to nodes.
//!
//! A vbucket may not take a node already in its chain. Costs:
//! - `KEEP` (0): the node that has this slot today;
//! - `DEMOTE` (1): a node holding the copy in an earlier slot (the old active kept as a
//!   replica): a map change, no data copied;
//! - `PROMOTE` (200): a node holding the copy in a later slot (a replica promoted to active
//!   or moved up). No data is copied here, but it leaves a hole in that later slot, which
//!   usually costs a build there. Priced far above a demotion so the search does not ripple
//!   promotions through unrelated chains to save nothing: removing one of 64 nodes (1024
//!   vbuckets, 2 replicas) changed 407 chains at price 1 and 64 at 200, for the same 48
//!   copies; over the test grid, prices up to 200 copy no more data than price 1;
//! - `BUILD` (1000): a node without a copy, which must be streamed one in full.
//!
//! Every vbucket first keeps its node where the quota allows. All of those cost 0, so that
//! partial assignment is the cheapest of its size. Then, while vbuckets are left, the cheapest
//! augmenting path is applied: an unplaced vbucket takes a node, possibly pushing a vbucket
//! placed there on to another node, and so on, to a node with room (successive shortest
//! paths; Bellman-Ford over the N nodes, with a queue). Each step keeps the assignment the
//! cheapest of its size, so the slot ends at the least cost its quotas allow. Ties go to the
//! node holding the fewest replicas of the landing vbucket's active (a failed node's
//! promotions spread), then to the lower position.
//!
//! Cost per path: O(N³) for the search at worst, plus O(vbuckets × N / N) to refresh the cached
//! edges of each node the path touched.

use std::collections::{BTreeSet, VecDeque};

pub(super) const KEEP: i64 = 0;
pub(super) const DEMOTE: i64 = 1;
pub(super) const PROMOTE: i64 = PROMOTE_COST;
/// Above any number of reslots one path can trade for it (a path has under N ≤ 128 steps).
pub(super) const BUILD: i64 = 1_000;
const CLASS_COST: [i64; 4] = [KEEP, DEMOTE, PROMOTE, BUILD];
const PROMOTE_COST: i64 = 300;

/// One vbucket's copies today as positions in the target list, by slot (0 = active); `None`
/// for an empty slot or a node that is leaving.
pub(super) struct Current {
    pub(super) slots: Vec<Option<usize>>,
}

impl Current {
    pub(super) fn at(&self, slot: usize) -> Option<usize> {
        self.slots.get(slot).copied().flatten()
    }

    fn slot_of(&self, p: usize) -> Option<usize> {
        self.slots.iter().position(|&s| s == Some(p))
    }
}

/// How the search reached a node.
#[derive(Debug, Clone, Copy)]
enum Step {
    Unreached,
    /// An unplaced vbucket takes the node.
    Start(usize),
    /// The vbucket placed on the first node moves on to this one.
    Via(usize, usize),
}

/// One slot being filled.
pub(super) struct SlotFill<'a> {
    cur: &'a [Current],
    /// Each vbucket's new chain so far (active, then earlier slots).
    chains: &'a [Vec<usize>],
    slot: usize,
    assigned: Vec<Option<usize>>,
    unplaced: usize,
    count: Vec<usize>,
    quota: Vec<usize>,
    /// pairs[a][r]: vbuckets with their active on a and a replica on r (the spread tie-break).
    pairs: &'a mut [Vec<usize>],
    /// Vbuckets placed on each node.
    members: Vec<BTreeSet<usize>>,
    /// edges[p][q]: the placed vbucket on p that moves to q most cheaply (lowest on ties), and
    /// the change in cost. Kept current for every node a path touches.
    edges: Vec<Vec<Option<(i64, usize)>>>,
    /// starts[p][k]: unplaced vbuckets that may take p at cost `CLASS_COST[k]`.
    starts: Vec<[BTreeSet<usize>; 4]>,
}

impl<'a> SlotFill<'a> {
    pub(super) fn new(
        cur: &'a [Current],
        chains: &'a [Vec<usize>],
        slot: usize,
        quota: Vec<usize>,
        pairs: &'a mut [Vec<usize>],
    ) -> SlotFill<'a> {
        let (v, n) = (chains.len(), quota.len());
        SlotFill {
            cur,
            chains,
            slot,
            assigned: vec![None; v],
            unplaced: v,
            count: vec![0; n],
            quota,
            pairs,
            members: vec![BTreeSet::new(); n],
            edges: vec![vec![None; n]; n],
            starts: vec![Default::default(); n],
        }
    }

    /// Keeps what can stay, then applies the cheapest augmenting path until every vbucket is
    /// placed. `None` if the quotas admit no assignment.
    pub(super) fn run(mut self) -> Option<Vec<usize>> {
        for vb in 0..self.assigned.len() {
            if let Some(p) = self.cur[vb].at(self.slot) {
                if self.allowed(vb, p) && self.has_room(p) {
                    self.put(vb, p);
                }
            }
        }
        self.index();
        while self.unplaced > 0 {
            if !self.augment_cheapest() {
                return None;
            }
        }
        self.assigned.into_iter().collect()
    }

    /// Builds the search's indexes from the placement so far.
    fn index(&mut self) {
        let n = self.count.len();
        for vb in (0..self.assigned.len()).filter(|&vb| self.assigned[vb].is_none()) {
            for p in 0..n {
                if !self.allowed(vb, p) {
                    continue;
                }
                let class = CLASS_COST
                    .iter()
                    .position(|&c| c == self.cost(vb, p))
                    .expect("costs are one of the classes");
                self.starts[p][class].insert(vb);
            }
        }
        for p in 0..n {
            self.refresh_edges(p);
        }
    }

    fn cost(&self, vb: usize, p: usize) -> i64 {
        // Slot numbers: 0 is the active, so an active moving to a replica slot is a demotion.
        match self.cur[vb].slot_of(p) {
            Some(s) if s == self.slot => KEEP,
            Some(s) if s < self.slot => DEMOTE,
            Some(_) => PROMOTE,
            None => BUILD,
        }
    }

    fn allowed(&self, vb: usize, p: usize) -> bool {
        !self.chains[vb].contains(&p)
    }

    fn has_room(&self, p: usize) -> bool {
        self.count[p] < self.quota[p]
    }

    /// Replicas of `vb`'s active already on `p` (none for the active slot).
    fn crowding(&self, vb: usize, p: usize) -> usize {
        self.chains[vb].first().map_or(0, |&a| self.pairs[a][p])
    }

    fn put(&mut self, vb: usize, p: usize) {
        assert!(self.assigned[vb].is_none() && self.allowed(vb, p));
        self.assigned[vb] = Some(p);
        self.unplaced -= 1;
        self.count[p] += 1;
        self.members[p].insert(vb);
        if let Some(&a) = self.chains[vb].first() {
            self.pairs[a][p] += 1;
        }
        for starts in &mut self.starts {
            for class in starts.iter_mut() {
                class.remove(&vb);
            }
        }
    }

    /// Moves placed `vb` on to `to` along a path; the caller settles counts (only the path's
    /// last node gains a vbucket) and refreshes edges.
    fn shift(&mut self, vb: usize, to: usize) {
        let from = self.assigned[vb].expect("only placed vbuckets shift");
        assert!(self.allowed(vb, to));
        self.members[from].remove(&vb);
        self.members[to].insert(vb);
        if let Some(&a) = self.chains[vb].first() {
            self.pairs[a][from] -= 1;
            self.pairs[a][to] += 1;
        }
        self.assigned[vb] = Some(to);
    }

    fn refresh_edges(&mut self, p: usize) {
        let n = self.count.len();
        let mut row: Vec<Option<(i64, usize)>> = vec![None; n];
        for &u in &self.members[p] {
            let here = self.cost(u, p);
            for q in (0..n).filter(|&q| q != p && self.allowed(u, q)) {
                let w = self.cost(u, q) - here;
                if row[q].is_none_or(|(best, _)| w < best) {
                    row[q] = Some((w, u));
                }
            }
        }
        self.edges[p] = row;
    }

    /// Finds and applies the cheapest path from any unplaced vbucket to a node with room.
    /// False if no node with room can be reached (no assignment exists), or, as a guard, if
    /// the costs admit a negative cycle (impossible while each step is a shortest path).
    fn augment_cheapest(&mut self) -> bool {
        let n = self.count.len();
        let mut dist = vec![i64::MAX; n];
        let mut how = vec![Step::Unreached; n];
        for p in 0..n {
            if let Some((class, &vb)) = self.starts[p]
                .iter()
                .enumerate()
                .find_map(|(k, set)| set.first().map(|vb| (k, vb)))
            {
                dist[p] = CLASS_COST[class];
                how[p] = Step::Start(vb);
            }
        }
        let mut queue: VecDeque<usize> = (0..n).filter(|&p| dist[p] != i64::MAX).collect();
        let mut queued = vec![false; n];
        for &p in &queue {
            queued[p] = true;
        }
        // A node improved more than n times means a negative cycle.
        let mut improved = vec![0usize; n];
        while let Some(p) = queue.pop_front() {
            queued[p] = false;
            for q in 0..n {
                let Some((w, u)) = self.edges[p][q] else {
                    continue;
                };
                if dist[p] + w < dist[q] {
                    dist[q] = dist[p] + w;
                    how[q] = Step::Via(p, u);
                    improved[q] += 1;
                    if improved[q] > n {
                        return false;
                    }
                    if !queued[q] {
                        queued[q] = true;
                        queue.push_back(q);
                    }
                }
            }
        }
        let landing = |t: usize| match how[t] {
            Step::Start(vb) | Step::Via(_, vb) => vb,
            Step::Unreached => unreachable!("only reached nodes are endpoints"),
        };
        let Some(end) = (0..n)
            .filter(|&t| dist[t] != i64::MAX && self.has_room(t))
            .min_by_key(|&t| (dist[t], self.crowding(landing(t), t), t))
        else {
            return false;
        };
        self.apply_path(end, &how);
        true
    }

    /// Walks the path back from `end`, shifting each vbucket on it one step forward.
    fn apply_path(&mut self, end: usize, how: &[Step]) {
        self.count[end] += 1;
        let mut touched = vec![end];
        let mut at = end;
        for _ in 0..=how.len() {
            match how[at] {
                Step::Via(prev, u) => {
                    self.shift(u, at);
                    at = prev;
                    touched.push(at);
                }
                Step::Start(vb) => {
                    self.count[at] -= 1;
                    self.put(vb, at);
                    for p in touched {
                        self.refresh_edges(p);
                    }
                    return;
                }
                Step::Unreached => break,
            }
        }
        unreachable!("a shortest path is simple and leads back to its start");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vbuckets with actives on `actives` and no replica today, filling replica slot 1 of
    /// three nodes, one replica per node.
    fn slot_one(actives: &[usize]) -> (Vec<Current>, Vec<Vec<usize>>) {
        let cur = actives
            .iter()
            .map(|&a| Current {
                slots: vec![Some(a), None],
            })
            .collect();
        (cur, actives.iter().map(|&a| vec![a]).collect())
    }

    #[test]
    fn a_node_with_room_is_taken_directly() {
        let (cur, chains) = slot_one(&[0, 1, 2]);
        let mut pairs = vec![vec![0; 3]; 3];
        let mut f = SlotFill::new(&cur, &chains, 1, vec![1, 1, 1], &mut pairs);
        f.put(0, 2);
        f.put(1, 0);
        f.index();
        assert!(f.augment_cheapest());
        assert_eq!(f.assigned, vec![Some(2), Some(0), Some(1)]);
    }

    #[test]
    fn an_augmenting_path_frees_a_node() {
        // vb 0 sits on 1 and vb 1 on 0, so vb 2 (active on 2) finds both nodes it may use
        // full: another vbucket must shift to node 2 to make room.
        let (cur, chains) = slot_one(&[0, 1, 2]);
        let mut pairs = vec![vec![0; 3]; 3];
        let mut f = SlotFill::new(&cur, &chains, 1, vec![1, 1, 1], &mut pairs);
        f.put(0, 1);
        f.put(1, 0);
        f.index();
        assert!(f.augment_cheapest());
        // Both paths cost the same; the lower node is reached first: vb 1 moves 0 -> 2.
        assert_eq!(f.assigned, vec![Some(1), Some(2), Some(0)]);
        assert_eq!(f.count, vec![1, 1, 1]);
        assert_eq!(f.pairs[1], vec![0, 0, 1]);
        assert_eq!(f.pairs[2], vec![1, 0, 0]);
        assert_eq!(f.unplaced, 0);
    }

    #[test]
    fn no_path_means_no_assignment() {
        // Only node 0 has room, and vb 0's active is on it.
        let (cur, chains) = slot_one(&[0, 1]);
        let mut pairs = vec![vec![0; 3]; 3];
        let f = SlotFill::new(&cur, &chains, 1, vec![2, 0, 0], &mut pairs);
        assert_eq!(f.run(), None);
    }

    /// A small deterministic generator (no dependency, same cases every run).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, bound: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) % bound as u64) as usize
        }
    }

    /// The cheapest cost of any assignment meeting the quotas, by trying them all.
    fn brute_force(fill: &SlotFill<'_>) -> Option<i64> {
        let (v, n) = (fill.assigned.len(), fill.quota.len());
        let mut best = None;
        for code in 0..n.pow(v as u32) {
            let picks: Vec<usize> = (0..v).map(|i| code / n.pow(i as u32) % n).collect();
            let mut count = vec![0; n];
            for &p in &picks {
                count[p] += 1;
            }
            if count != fill.quota || (0..v).any(|vb| !fill.allowed(vb, picks[vb])) {
                continue;
            }
            let cost: i64 = (0..v).map(|vb| fill.cost(vb, picks[vb])).sum();
            best = Some(best.map_or(cost, |b: i64| b.min(cost)));
        }
        best
    }

    #[test]
    fn a_filled_slot_is_the_cheapest_assignment() {
        let mut rng = Lcg(7);
        for _ in 0..1000 {
            let n = 2 + rng.below(3);
            let v = 1 + rng.below(6);
            // Today's chains: distinct nodes, some slots empty; the new chain has its active.
            let mut cur = Vec::new();
            let mut chains = Vec::new();
            for _ in 0..v {
                let mut slots: Vec<Option<usize>> = Vec::new();
                for _ in 0..3 {
                    let p = rng.below(n + 1);
                    let fresh = p < n && !slots.contains(&Some(p));
                    slots.push(fresh.then_some(p));
                }
                cur.push(Current { slots });
                chains.push(vec![rng.below(n)]);
            }
            let mut quota = vec![0; n];
            for _ in 0..v {
                quota[rng.below(n)] += 1;
            }
            let mut pairs = vec![vec![0; n]; n];
            let fill = SlotFill::new(&cur, &chains, 1, quota, &mut pairs);
            let expected = brute_force(&fill);
            let costs: Vec<Vec<i64>> = (0..v)
                .map(|vb| (0..n).map(|p| fill.cost(vb, p)).collect())
                .collect();
            let got = fill
                .run()
                .map(|picks| picks.iter().enumerate().map(|(vb, &p)| costs[vb][p]).sum());
            assert_eq!(got, expected);
        }
    }
}

//! `desired_voters`: which nodes vote in the metadata's Raft group.
//!
//! - fewer than 3 nodes: all of them (there is no majority to spare anyway);
//! - 3 or 4 nodes: 3 voters, so one loss is survived (a 4th voter would add a vote to every
//!   commit and survive no more failures);
//! - 5 or more: 5 voters, so two losses are survived; more voters would only slow commits.
//!
//! The rest are learners: they receive the log and can be promoted, but are not waited for.
//!
//! Changing voters is a membership change (a joint-consensus round), so the policy keeps
//! every current voter it can and only fills or trims the difference. Fills and trims go by
//! node id, lowest first, so the same input always gives the same set.

use crate::node::NodeId;
use std::collections::BTreeSet;

/// Voters for a group of 3 or 4 nodes.
pub const VOTERS_SMALL: usize = 3;
/// Voters for a group of 5 or more nodes.
pub const VOTERS_LARGE: usize = 5;

/// How many of `nodes` nodes vote.
pub fn voter_count(nodes: usize) -> usize {
    match nodes {
        n if n < VOTERS_SMALL => n,
        n if n < VOTERS_LARGE => VOTERS_SMALL,
        _ => VOTERS_LARGE,
    }
}

/// The voters for `nodes` (the members that may vote: the caller leaves out nodes it knows to
/// be down or leaving), given the voters now. Current voters among `nodes` are kept, lowest
/// ids first, up to the count; the remaining seats go to the lowest ids among the others.
pub fn desired_voters(nodes: &[NodeId], current_voters: &BTreeSet<NodeId>) -> BTreeSet<NodeId> {
    let eligible: BTreeSet<NodeId> = nodes.iter().copied().collect();
    let count = voter_count(eligible.len());
    let kept = eligible.iter().filter(|n| current_voters.contains(n));
    let added = eligible.iter().filter(|n| !current_voters.contains(n));
    kept.chain(added).take(count).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[u32]) -> Vec<NodeId> {
        list.iter().copied().map(NodeId).collect()
    }

    fn set(list: &[u32]) -> BTreeSet<NodeId> {
        ids(list).into_iter().collect()
    }

    #[test]
    fn counts_follow_the_group_size() {
        let counts: Vec<usize> = (0..=8).map(voter_count).collect();
        assert_eq!(counts, vec![0, 1, 2, 3, 3, 5, 5, 5, 5]);
    }

    #[test]
    fn small_groups_all_vote() {
        assert_eq!(desired_voters(&[], &set(&[])), set(&[]));
        assert_eq!(desired_voters(&ids(&[4]), &set(&[])), set(&[4]));
        assert_eq!(desired_voters(&ids(&[4, 1]), &set(&[4])), set(&[1, 4]));
    }

    #[test]
    fn growing_keeps_voters_and_fills_by_id() {
        // The fourth node stays a learner; the fifth makes everyone a voter.
        let three = desired_voters(&ids(&[0, 1, 2]), &set(&[0, 1]));
        assert_eq!(three, set(&[0, 1, 2]));
        let four = desired_voters(&ids(&[0, 1, 2, 3]), &three);
        assert_eq!(four, three);
        let five = desired_voters(&ids(&[0, 1, 2, 3, 4]), &four);
        assert_eq!(five, set(&[0, 1, 2, 3, 4]));
        let six = desired_voters(&ids(&[0, 1, 2, 3, 4, 5]), &five);
        assert_eq!(six, five);
    }

    #[test]
    fn current_voters_win_over_lower_ids() {
        // Voters 5, 6, 7 stay voters although 0..4 have lower ids.
        let nodes = ids(&[0, 1, 5, 6, 7]);
        let out = desired_voters(&nodes, &set(&[5, 6, 7]));
        assert_eq!(out, set(&[0, 1, 5, 6, 7]));
        let four = ids(&[0, 5, 6, 7]);
        assert_eq!(desired_voters(&four, &set(&[5, 6, 7])), set(&[5, 6, 7]));
    }

    #[test]
    fn a_lost_voter_is_replaced_by_the_lowest_learner() {
        // Voter 1 is gone from the eligible nodes: learner 3 takes its seat, not 4.
        let out = desired_voters(&ids(&[0, 2, 3, 4]), &set(&[0, 1, 2]));
        assert_eq!(out, set(&[0, 2, 3]));
    }

    #[test]
    fn shrinking_keeps_the_lowest_current_voters() {
        // From five voters down to four nodes: three of the remaining voters keep their seat.
        let out = desired_voters(&ids(&[1, 2, 3, 4]), &set(&[0, 1, 2, 3, 4]));
        assert_eq!(out, set(&[1, 2, 3]));
    }

    #[test]
    fn duplicates_and_order_do_not_matter() {
        let a = desired_voters(&ids(&[3, 1, 2, 1, 0]), &set(&[2]));
        let b = desired_voters(&ids(&[0, 1, 2, 3]), &set(&[2]));
        assert_eq!(a, b);
        assert_eq!(a, set(&[0, 1, 2]));
    }
}

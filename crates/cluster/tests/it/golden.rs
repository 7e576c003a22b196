//! Golden files for the planner's interesting decisions (style.md: "golden files for the
//! cluster map and rebalance plans"): placements, rebalance plans, a failover, and the terse
//! JSON clients read. Each output is compared byte for byte with `tests/golden/<name>`; a
//! mismatch fails with a line diff. `UPDATE_GOLDEN=1 cargo test -p sluice-cluster --test
//! it golden::` rewrites the files, which must then be read and checked by hand before committing.
#![allow(clippy::unwrap_used)] // a test's panic is its failure, with its line

use sluice_cluster::balance::fillable_replicas;
use sluice_cluster::{
    fail_over, node_counts, place, plan_rebalance, BucketInfo, BucketKind, ClusterMap, NodeId,
    NodeInfo, RebalancePlan, ServingNode, VbMap,
};
use std::fmt::Write;
use std::path::PathBuf;

fn ids(range: std::ops::Range<u32>) -> Vec<NodeId> {
    range.map(NodeId).collect()
}

fn list(nodes: &[NodeId]) -> String {
    nodes
        .iter()
        .map(NodeId::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compares `actual` with the golden file, or rewrites it under `UPDATE_GOLDEN=1`.
fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "{} differs (- golden, + actual; UPDATE_GOLDEN=1 rewrites it):\n{}",
            path.display(),
            line_diff(&expected, actual)
        );
    }
}

/// A line diff by longest common subsequence, showing changed lines with 2 lines of context.
fn line_diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', a[i]));
            i += 1;
        } else {
            lines.push(('+', b[j]));
            j += 1;
        }
    }
    let near_change = |k: usize| {
        let lo = k.saturating_sub(2);
        let hi = (k + 3).min(lines.len());
        lines[lo..hi].iter().any(|(c, _)| *c != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (c, line)) in lines.iter().enumerate() {
        if near_change(k) {
            writeln!(out, "{c} {line}").unwrap();
            skipped = false;
        } else if !skipped {
            out.push_str("  ...\n");
            skipped = true;
        }
    }
    out
}

fn render_chains(out: &mut String, map: &VbMap) {
    for (vb, chain) in map.iter() {
        writeln!(out, "  {:<6} {chain}", vb.to_string()).unwrap();
    }
}

/// Per-node counts: actives, each replica slot, all replicas, all copies.
fn render_counts(out: &mut String, map: &VbMap, nodes: &[NodeId]) {
    let slots = usize::from(map.replicas());
    let mut header = String::from("  node  active");
    for s in 1..=slots {
        write!(header, "  replica{s}").unwrap();
    }
    writeln!(out, "{header}  replicas  copies").unwrap();
    for c in node_counts(map, nodes) {
        let mut row = format!("  {:<4}  {:>6}", c.node.to_string(), c.active);
        for n in &c.by_replica_slot {
            write!(row, "  {n:>8}").unwrap();
        }
        writeln!(out, "{row}  {:>8}  {:>6}", c.replicas, c.copies()).unwrap();
    }
}

/// For each node, where the replicas of its actives are: what its failure promotes (slot 1)
/// and rebuilds (all slots).
fn render_spread(out: &mut String, map: &VbMap, nodes: &[NodeId]) {
    writeln!(
        out,
        "replicas of each node's actives (slot 1 / all slots), by holder:"
    )
    .unwrap();
    for &a in nodes {
        let mine: Vec<_> = map.iter().filter(|(_, c)| c.active == Some(a)).collect();
        let cells: Vec<String> = nodes
            .iter()
            .filter(|&&b| b != a)
            .map(|&b| {
                let first = mine
                    .iter()
                    .filter(|(_, c)| c.replicas.first() == Some(&Some(b)));
                let any = mine.iter().filter(|(_, c)| c.replicas.contains(&Some(b)));
                format!("{b} {}/{}", first.count(), any.count())
            })
            .collect();
        writeln!(out, "  {a} -> {}", cells.join(", ")).unwrap();
    }
}

fn render_placement(nodes: &[NodeId], vbuckets: u16, replicas: u8) -> String {
    let map = place(nodes, vbuckets, replicas).unwrap();
    let mut out = format!(
        "place({vbuckets} vbuckets on [{}], replicas={replicas})\n\nchains (active first):\n",
        list(nodes)
    );
    render_chains(&mut out, &map);
    out.push_str("\ncounts:\n");
    render_counts(&mut out, &map, nodes);
    out.push('\n');
    render_spread(&mut out, &map, nodes);
    out
}

fn render_plan_summary(out: &mut String, plan: &RebalancePlan) {
    let drops: usize = plan.moves().iter().map(|m| m.drops().len()).sum();
    writeln!(
        out,
        "method {:?}: {} moves, {} copies built, {} takeovers, {} copies dropped",
        plan.method(),
        plan.moves().len(),
        plan.copies_built(),
        plan.takeovers(),
        drops
    )
    .unwrap();
}

fn render_rebalance(before: &[NodeId], after: &[NodeId], vbuckets: u16, replicas: u8) -> String {
    let current = place(before, vbuckets, replicas).unwrap();
    let plan = plan_rebalance(&current, after, replicas).unwrap();
    let mut out = format!(
        "rebalance {vbuckets} vbuckets, replicas={replicas}: [{}] -> [{}]\n",
        list(before),
        list(after)
    );
    render_plan_summary(&mut out, &plan);
    out.push_str("\nmoves, in order:\n");
    for (i, m) in plan.moves().iter().enumerate() {
        writeln!(out, "  {:>2}. {m}", i + 1).unwrap();
    }
    out.push_str("\ncounts before:\n");
    render_counts(&mut out, &current, before);
    out.push_str("\ncounts after:\n");
    render_counts(&mut out, plan.target(), after);
    out.push('\n');
    render_spread(&mut out, plan.target(), after);
    out.push_str("\ntarget chains:\n");
    render_chains(&mut out, plan.target());
    out
}

#[test]
fn placement_16_vbuckets_3_nodes_1_replica() {
    check_golden(
        "placement_3n_16vb_1r.txt",
        &render_placement(&ids(0..3), 16, 1),
    );
}

#[test]
fn placement_16_vbuckets_4_nodes_2_replicas() {
    check_golden(
        "placement_4n_16vb_2r.txt",
        &render_placement(&ids(0..4), 16, 2),
    );
}

#[test]
fn rebalance_3_to_4_nodes() {
    check_golden(
        "rebalance_3n_to_4n_16vb_1r.txt",
        &render_rebalance(&ids(0..3), &ids(0..4), 16, 1),
    );
}

#[test]
fn rebalance_4_to_3_nodes() {
    let after = [NodeId(0), NodeId(2), NodeId(3)];
    check_golden(
        "rebalance_4n_to_3n_16vb_2r.txt",
        &render_rebalance(&ids(0..4), &after, 16, 2),
    );
}

#[test]
fn rebalance_2_to_3_nodes_1024_vbuckets_summarised() {
    let (before, after) = (ids(0..2), ids(0..3));
    let current = place(&before, 1024, 1).unwrap();
    let plan = plan_rebalance(&current, &after, 1).unwrap();
    let mut out = format!(
        "rebalance 1024 vbuckets, replicas=1: [{}] -> [{}]\n",
        list(&before),
        list(&after)
    );
    render_plan_summary(&mut out, &plan);
    out.push_str("\ncounts before:\n");
    render_counts(&mut out, &current, &before);
    out.push_str("\ncounts after:\n");
    render_counts(&mut out, plan.target(), &after);
    out.push_str(
        "\nper node: moves it streams from (source), copies it receives, copies it drops\n",
    );
    for n in &after {
        let source = plan
            .moves()
            .iter()
            .filter(|m| m.source() == Some(*n))
            .count();
        let built = plan
            .moves()
            .iter()
            .filter(|m| m.builds().contains(n))
            .count();
        let dropped = plan
            .moves()
            .iter()
            .filter(|m| m.drops().contains(n))
            .count();
        writeln!(out, "  {n}: {source:>4} {built:>4} {dropped:>4}").unwrap();
    }
    out.push_str("\nfirst 12 moves:\n");
    for (i, m) in plan.moves().iter().take(12).enumerate() {
        writeln!(out, "  {:>2}. {m}", i + 1).unwrap();
    }
    out.push('\n');
    render_spread(&mut out, plan.target(), &after);
    check_golden("rebalance_2n_to_3n_1024vb_1r.txt", &out);
}

#[test]
fn failover_of_one_node() {
    let nodes = ids(0..3);
    let map = place(&nodes, 16, 1).unwrap();
    let out = fail_over(&map, &[NodeId(1)]);
    let mut text = String::from("fail_over([n1]) on 16 vbuckets over [n0 n1 n2], replicas=1\n\n");
    text.push_str("chains before -> after:\n");
    for ((vb, before), (_, after)) in map.iter().zip(out.map.iter()) {
        let mark = if before == after { "" } else { "   *" };
        writeln!(text, "  {:<6} {before} -> {after}{mark}", vb.to_string()).unwrap();
    }
    text.push_str("\npromotions:\n");
    for p in &out.promotions {
        writeln!(text, "  {}: {} -> {}", p.vb, p.from, p.to).unwrap();
    }
    let lost: Vec<String> = out.lost.iter().map(ToString::to_string).collect();
    writeln!(text, "\nlost: [{}]", lost.join(" ")).unwrap();
    let survivors = [NodeId(0), NodeId(2)];
    text.push_str("\ncounts after:\n");
    render_counts(&mut text, &out.map, &survivors);
    writeln!(
        text,
        "\nreplica slots fillable by the survivors: {}",
        fillable_replicas(survivors.len(), out.map.replicas())
    )
    .unwrap();
    check_golden("failover_3n_16vb_1r_n1.txt", &text);
}

#[test]
fn terse_bucket_config_3_nodes_8_vbuckets() {
    let nodes = ids(0..3);
    let vbmap = place(&nodes, 8, 1).unwrap();
    let infos = nodes
        .iter()
        .enumerate()
        .map(|(i, &id)| NodeInfo {
            id,
            host: format!("10.0.0.{}", i + 1),
            kv_port: 11210,
            admin_port: 8091,
            tls: None,
            services: sluice_cluster::Services::ALL,
        })
        .collect();
    let map = ClusterMap::new(infos, vbmap).unwrap();
    let bucket = BucketInfo {
        name: "default",
        uuid: "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        kind: BucketKind::Couchbase,
    };
    let serving = ServingNode {
        host: "10.0.0.2",
        kv_port: 11210,
        admin_port: 8091,
        services: sluice_cluster::Services::ALL,
    };
    // As a JSON document (keys in order), so the golden file shows the fields sorted.
    let json = serde_json::to_value(map.terse_bucket_config(&bucket, &serving)).unwrap();
    let mut text = serde_json::to_string_pretty(&json).unwrap();
    text.push('\n');
    check_golden("terse_3n_8vb.json", &text);
}

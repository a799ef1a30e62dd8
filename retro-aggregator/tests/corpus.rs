//! The corpus (`tests/corpus`, 244 retrospectives written to look like a
//! fleet's, with the problem family and category of each in
//! `expected.tsv`) classified and clustered in process: every run gets its
//! family's category, and at the default threshold no cluster mixes two
//! families. Lexical clustering groups wordings, not problems: a family
//! written five different ways comes out as up to five clusters (96 for
//! the 25 families). The signature step merges a known problem's wordings
//! (28 clusters, still none mixing families). Both counts are pinned so a
//! change to the features or the signatures shows. The signatures were
//! written with this corpus in view, so 28 is what they do here, not a
//! promise for a fleet's unseen wordings. The end-to-end test does the
//! same through the store and the CLI.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use patchpilot_retro::cluster::{Item, cluster_at, cluster_signed_at};
use patchpilot_retro::signature::signature;
use patchpilot_retro::{RetroRecord, classify};

fn corpus() -> (Vec<RetroRecord>, Vec<(String, String)>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let text = std::fs::read_to_string(dir.join("retros.jsonl")).expect("corpus");
    let records: Vec<RetroRecord> = text
        .lines()
        .enumerate()
        .map(|(i, line)| RetroRecord::from_json_line(line, i + 1).expect("a valid line"))
        .collect();
    let expected = std::fs::read_to_string(dir.join("expected.tsv")).expect("expected");
    let expected: Vec<(String, String)> = expected
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            (c[1].to_owned(), c[2].to_owned())
        })
        .collect();
    assert_eq!(records.len(), expected.len());
    (records, expected)
}

/// Clusters mixing families, and clusters for the families, at
/// `threshold`, clustering within each run's category, by text alone or
/// after the signature step (`signed`).
fn errors_at(records: &[RetroRecord], families: &[&str], threshold: f64, signed: bool) -> (usize, usize) {
    let mut by_category: BTreeMap<String, (Vec<Item<'_>>, Vec<Option<String>>)> = BTreeMap::new();
    for (owner, record) in records.iter().enumerate() {
        for (kind, text) in record.items() {
            let entry = by_category.entry(classify(record).category.as_str().to_owned()).or_default();
            entry.0.push(Item { text, owner });
            entry.1.push(signature(kind, text));
        }
    }
    let mut mixed = 0;
    let mut clusters_of: BTreeMap<&str, BTreeSet<(String, usize)>> = BTreeMap::new();
    for (category, (items, signatures)) in &by_category {
        let clusters = if signed {
            cluster_signed_at(items, signatures, threshold)
        } else {
            cluster_at(items, threshold)
        };
        for (n, cluster) in clusters.iter().enumerate() {
            let fams: BTreeSet<&str> = cluster.items.iter().map(|&i| families[items[i].owner]).collect();
            if fams.len() > 1 {
                println!("mixed ({category}, {:?}): {fams:?}", cluster.signature);
                mixed += 1;
            }
            for f in fams {
                clusters_of.entry(f).or_default().insert((category.clone(), n));
            }
        }
    }
    for (family, clusters) in clusters_of.iter().filter(|(_, c)| c.len() > 1) {
        println!("  {family}: {} clusters (signed: {signed})", clusters.len());
    }
    (mixed, clusters_of.values().map(|c| c.len()).sum::<usize>())
}

#[test]
fn every_run_is_classified_as_its_family() {
    let (records, expected) = corpus();
    let wrong: Vec<String> = records
        .iter()
        .zip(&expected)
        .filter(|(r, (_, category))| classify(r).category.as_str() != category)
        .map(|(r, (family, category))| {
            format!("{} ({family}): {:?}, expected {category}", r.run_id, classify(r))
        })
        .collect();
    assert!(wrong.is_empty(), "{}:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn no_cluster_mixes_two_families_at_the_default_threshold() {
    let (records, expected) = corpus();
    let families: Vec<&str> = expected.iter().map(|(f, _)| f.as_str()).collect();
    for threshold in [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6] {
        let (mixed, split) = errors_at(&records, &families, threshold, false);
        let (mixed_signed, split_signed) = errors_at(&records, &families, threshold, true);
        println!(
            "threshold {threshold}: by text {mixed} clusters mix families, {split} clusters for the families; \
             with signatures {mixed_signed} mix, {split_signed} clusters"
        );
    }
    let threshold = patchpilot_retro::cluster::THRESHOLD;
    let (mixed, clusters) = errors_at(&records, &families, threshold, false);
    assert_eq!(mixed, 0, "clusters mixing families, by text alone");
    assert_eq!(clusters, 96, "clusters for the 25 families by text alone (their different wordings apart)");
    let signed = records
        .iter()
        .flat_map(|r| r.items())
        .filter(|(kind, text)| signature(*kind, text).is_some())
        .count();
    let items = records.iter().flat_map(|r| r.items()).count();
    println!("{signed} of {items} items have a known signature");
    let (mixed, clusters) = errors_at(&records, &families, threshold, true);
    assert_eq!(mixed, 0, "clusters mixing families, with signatures");
    // 25 families in 28 clusters: the two tools of the Node family (a
    // version manager, corepack) are two signatures; the model's refusals
    // have no signature and keep their two wordings apart; one
    // manifest-unknown line names no manifest and is clustered by text.
    assert_eq!(clusters, 28, "clusters for the 25 families with signatures");
}

#[test]
#[ignore = "a tuning aid: prints each family's clusters"]
fn show_clusters() {
    let (records, expected) = corpus();
    let families: Vec<&str> = expected.iter().map(|(f, _)| f.as_str()).collect();
    let items: Vec<Item<'_>> = records
        .iter()
        .enumerate()
        .filter(|(i, _)| families[*i] == "go_proxy_timeout")
        .flat_map(|(owner, r)| r.items().map(move |(_, text)| Item { text, owner }))
        .collect();
    for c in cluster_at(&items, 0.35) {
        println!("--- {}", c.key);
        for i in c.items {
            println!("    {}", items[i].text.replace('\n', " | "));
        }
    }
}

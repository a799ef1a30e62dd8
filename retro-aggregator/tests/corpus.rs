//! The corpus (`tests/corpus`, 244 retrospectives written to look like a
//! fleet's, with the problem family and category of each in
//! `expected.tsv`) classified and clustered in process: every run gets its
//! family's category, and at the default threshold no cluster mixes two
//! families. Lexical clustering groups wordings, not problems: a family
//! written five different ways comes out as up to five clusters, and the
//! count of clusters is pinned so a change to the features shows. The
//! end-to-end test does the same through the store and the CLI.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use patchpilot_retro::cluster::{Item, cluster_at};
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

/// Clusters mixing families, and families split over clusters, at
/// `threshold`, clustering within each run's category.
fn errors_at(records: &[RetroRecord], families: &[&str], threshold: f64) -> (usize, usize) {
    let mut by_category: BTreeMap<String, Vec<Item<'_>>> = BTreeMap::new();
    for (owner, record) in records.iter().enumerate() {
        for (_, text) in record.items() {
            by_category
                .entry(classify(record).category.as_str().to_owned())
                .or_default()
                .push(Item { text, owner });
        }
    }
    let mut mixed = 0;
    let mut clusters_of: BTreeMap<&str, BTreeSet<(String, usize)>> = BTreeMap::new();
    for (category, items) in &by_category {
        for (n, cluster) in cluster_at(items, threshold).iter().enumerate() {
            let fams: BTreeSet<&str> = cluster.items.iter().map(|&i| families[items[i].owner]).collect();
            if fams.len() > 1 {
                mixed += 1;
            }
            for f in fams {
                clusters_of.entry(f).or_default().insert((category.clone(), n));
            }
        }
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
        let (mixed, split) = errors_at(&records, &families, threshold);
        println!("threshold {threshold}: {mixed} clusters mix families; {split} clusters for the families");
    }
    let (mixed, clusters) = errors_at(&records, &families, patchpilot_retro::cluster::THRESHOLD);
    assert_eq!(mixed, 0, "clusters mixing families");
    assert_eq!(clusters, 96, "clusters for the 25 families (their different wordings apart)");
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

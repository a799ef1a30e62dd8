//! Condensing: the problem items of many retrospectives grouped into
//! clusters of the same problem, deterministically.
//!
//! 1. Each item is normalised ([`crate::normalize`]); items with the same
//!    normalised text are one document with a weight (the common case in a
//!    fleet: the same error line from many runs).
//! 2. Each document is a TF-IDF vector over its tokens and token pairs,
//!    with IDF over the items, so a distinctive word (`host:golang`,
//!    `toomanyrequests`) outweighs a common one (`failed`).
//! 3. Documents are taken heaviest first (ties by text) and join the
//!    cluster whose centroid is most similar (cosine at least
//!    [`THRESHOLD`]), found through an inverted index of centroid terms,
//!    or start a new one.
//!
//! The same input gives the same clusters in the same order, whatever
//! order the items came in.
//!
//! [`cluster_signed`] runs a step before these: items with a known
//! problem's signature ([`crate::signature`]) join that signature's
//! cluster whatever their wording, and only the rest are clustered by text.

use std::collections::{BTreeMap, HashMap};

use crate::normalize;

/// Least cosine similarity to join a cluster. On the corpus in
/// `tests/corpus` (25 problem families, each written 3 to 6 ways) 0.35 and
/// below let one cluster mix two families; 0.4 keeps every cluster to one
/// family, with a family's differently worded accounts in clusters of
/// their own (96 clusters for 25 families; 28 after the signature step of
/// [`cluster_signed`], which merges known problems' wordings).
pub const THRESHOLD: f64 = 0.4;

/// An item to cluster: its text and who it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<'a> {
    /// The original text.
    pub text: &'a str,
    /// The index of the retrospective it came from.
    pub owner: usize,
}

/// A group of items saying the same thing.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// Indexes (into the input) of the items, in input order.
    pub items: Vec<usize>,
    /// The normalised text of its heaviest document, or the signature's
    /// name.
    pub key: String,
    /// The signature that merged it, when one did.
    pub signature: Option<String>,
}

/// Groups `items` whose `signatures` (one per item) name a known problem by
/// that signature, and the rest by text at [`THRESHOLD`]; clusters come
/// largest first (ties by key).
pub fn cluster_signed(items: &[Item<'_>], signatures: &[Option<String>]) -> Vec<Cluster> {
    cluster_signed_at(items, signatures, THRESHOLD)
}

/// [`cluster_signed`] at `threshold`.
pub fn cluster_signed_at(items: &[Item<'_>], signatures: &[Option<String>], threshold: f64) -> Vec<Cluster> {
    let mut signed: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut rest: Vec<usize> = Vec::new();
    for (index, _) in items.iter().enumerate() {
        match signatures.get(index).and_then(Option::as_deref) {
            Some(name) => signed.entry(name).or_default().push(index),
            None => rest.push(index),
        }
    }
    let mut clusters: Vec<Cluster> = signed
        .into_iter()
        .map(|(name, items)| Cluster { items, key: name.to_owned(), signature: Some(name.to_owned()) })
        .collect();
    let unsigned: Vec<Item<'_>> = rest.iter().map(|&i| items[i].clone()).collect();
    for mut found in cluster_at(&unsigned, threshold) {
        for item in &mut found.items {
            *item = rest[*item];
        }
        clusters.push(found);
    }
    clusters.sort_by(|a, b| b.items.len().cmp(&a.items.len()).then_with(|| a.key.cmp(&b.key)));
    clusters
}

type Vector = Vec<(u32, f64)>;

/// Groups `items` at [`THRESHOLD`]; clusters come largest first (ties by
/// key).
pub fn cluster(items: &[Item<'_>]) -> Vec<Cluster> {
    cluster_at(items, THRESHOLD)
}

/// Groups `items`, joining a cluster at cosine `threshold` or more.
pub fn cluster_at(items: &[Item<'_>], threshold: f64) -> Vec<Cluster> {
    // 1. Documents: one per normalised text.
    let mut by_text: HashMap<String, Vec<usize>> = HashMap::new();
    let mut tokens_of: HashMap<String, Vec<String>> = HashMap::new();
    for (index, item) in items.iter().enumerate() {
        let tokens = normalize::tokens(item.text);
        let key = tokens.join(" ");
        by_text.entry(key.clone()).or_default().push(index);
        tokens_of.entry(key).or_insert(tokens);
    }
    let mut documents: Vec<(String, Vec<usize>)> = by_text.into_iter().collect();
    documents.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));

    // 2. Terms and their IDF over items.
    let mut vocabulary: HashMap<String, u32> = HashMap::new();
    let mut term_lists: Vec<Vec<u32>> = Vec::with_capacity(documents.len());
    for (key, _) in &documents {
        let tokens = &tokens_of[key];
        let mut terms: Vec<u32> = features(tokens)
            .into_iter()
            .map(|f| {
                let next = vocabulary.len() as u32;
                *vocabulary.entry(f).or_insert(next)
            })
            .collect();
        terms.sort_unstable();
        term_lists.push(terms);
    }
    let mut df = vec![0f64; vocabulary.len()];
    for (terms, (_, members)) in term_lists.iter().zip(&documents) {
        let mut last = None;
        for &t in terms {
            if last != Some(t) {
                df[t as usize] += members.len() as f64;
                last = Some(t);
            }
        }
    }
    let total = items.len() as f64;
    let idf: Vec<f64> = df.iter().map(|d| ((total + 1.0) / (d + 1.0)).ln() + 1.0).collect();
    let vectors: Vec<Vector> = term_lists.iter().map(|terms| tf_idf(terms, &idf)).collect();

    // 3. Greedy assignment against centroids.
    let mut centroids: Vec<HashMap<u32, f64>> = Vec::new();
    let mut norms: Vec<f64> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut index: HashMap<u32, Vec<usize>> = HashMap::new();
    for (document, vector) in documents.iter().zip(&vectors) {
        let weight = document.1.len() as f64;
        let mut candidates: Vec<usize> =
            vector.iter().flat_map(|(t, _)| index.get(t).into_iter().flatten().copied()).collect();
        candidates.sort_unstable();
        candidates.dedup();
        let best = candidates
            .into_iter()
            .map(|c| (c, cosine(vector, &centroids[c], norms[c])))
            .filter(|(_, similarity)| *similarity >= threshold)
            .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
        let chosen = match best {
            Some((c, _)) => c,
            None => {
                centroids.push(HashMap::new());
                norms.push(0.0);
                members.push(Vec::new());
                keys.push(document.0.clone());
                centroids.len() - 1
            }
        };
        for &(term, value) in vector {
            let entry = centroids[chosen].entry(term).or_insert(0.0);
            if *entry == 0.0 {
                index.entry(term).or_default().push(chosen);
            }
            *entry += value * weight;
        }
        norms[chosen] = centroids[chosen].values().map(|v| v * v).sum::<f64>().sqrt();
        members[chosen].extend(&document.1);
    }
    let mut clusters: Vec<Cluster> = members
        .into_iter()
        .zip(keys)
        .map(|(mut items, key)| {
            items.sort_unstable();
            Cluster { items, key, signature: None }
        })
        .collect();
    clusters.sort_by(|a, b| b.items.len().cmp(&a.items.len()).then_with(|| a.key.cmp(&b.key)));
    clusters
}

/// Words and adjacent word pairs. Placeholders say only that something
/// varied there, so they are left out of both.
fn features(tokens: &[String]) -> Vec<String> {
    let words: Vec<&String> = tokens.iter().filter(|t| !t.starts_with('<')).collect();
    let mut out: Vec<String> = words.iter().map(|w| (*w).clone()).collect();
    out.extend(
        tokens
            .windows(2)
            .filter(|pair| !pair[0].starts_with('<') && !pair[1].starts_with('<'))
            .map(|pair| format!("{} {}", pair[0], pair[1])),
    );
    out
}

fn tf_idf(terms: &[u32], idf: &[f64]) -> Vector {
    let mut counts: BTreeMap<u32, f64> = BTreeMap::new();
    for &t in terms {
        *counts.entry(t).or_insert(0.0) += 1.0;
    }
    let mut vector: Vector = counts.into_iter().map(|(t, n)| (t, n * idf[t as usize])).collect();
    let norm = vector.iter().map(|(_, v)| v * v).sum::<f64>().sqrt();
    if norm > 0.0 {
        for (_, v) in &mut vector {
            *v /= norm;
        }
    }
    vector
}

fn cosine(vector: &Vector, centroid: &HashMap<u32, f64>, norm: f64) -> f64 {
    if norm == 0.0 {
        return 0.0;
    }
    vector.iter().map(|(t, v)| v * centroid.get(t).copied().unwrap_or(0.0)).sum::<f64>() / norm
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items<'a>(texts: &[&'a str]) -> Vec<Item<'a>> {
        texts.iter().enumerate().map(|(owner, text)| Item { text, owner }).collect()
    }

    #[test]
    fn the_same_problem_in_other_words_and_versions_is_one_cluster() {
        let texts = [
            "go: downloading golang.org/x/net v0.23.0: proxy.golang.org: dial tcp 142.250.1.1:443: i/o timeout",
            "docker: toomanyrequests: You have reached your pull rate limit",
            "go: downloading golang.org/x/crypto v0.21.0: proxy.golang.org: dial tcp [2607:f8b0::22]:443: i/o timeout",
            "toomanyrequests: you have reached your pull rate limit (docker.io/library/golang)",
            "make: command not found",
        ];
        let clusters = cluster(&items(&texts));
        let groups: Vec<Vec<usize>> = clusters.iter().map(|c| c.items.clone()).collect();
        assert_eq!(groups, [vec![1, 3], vec![0, 2], vec![4]]);
    }

    #[test]
    fn a_signature_merges_what_the_words_keep_apart() {
        let texts = [
            "`go get golang.org/x/net@v0.33.0` could not reach proxy.golang.org: net/http: TLS handshake timeout",
            "Module proxy stopped answering: `go mod tidy` hung for 190s, then proxy.golang.org i/o timeout",
            "the build failed for reasons I could not see",
        ];
        let items = items(&texts);
        assert_eq!(cluster(&items).len(), 3, "apart by their words");
        let signatures: Vec<Option<String>> = texts
            .iter()
            .map(|t| crate::signature::signature(crate::record::ItemKind::WentWrong, t))
            .collect();
        let clusters = cluster_signed(&items, &signatures);
        let groups: Vec<(Vec<usize>, Option<&str>)> =
            clusters.iter().map(|c| (c.items.clone(), c.signature.as_deref())).collect();
        assert_eq!(groups, [(vec![0, 1], Some("go module proxy unreachable")), (vec![2], None)]);
    }

    #[test]
    fn input_order_does_not_change_the_clusters() {
        let texts = ["a b c", "a b d", "x y z", "x y w", "a b c"];
        let forward = cluster(&items(&texts));
        let reversed: Vec<&str> = texts.iter().rev().copied().collect();
        let backward = cluster(&items(&reversed));
        let keys = |c: &[Cluster]| c.iter().map(|c| (c.key.clone(), c.items.len())).collect::<Vec<_>>();
        assert_eq!(keys(&forward), keys(&backward));
    }
}

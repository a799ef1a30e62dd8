//! The fleet view: retrospectives in a time range condensed into clusters
//! ranked by count and trend, the repositories where trouble concentrates,
//! and what to act on. Nothing here is applied anywhere: the drafts of
//! repository instructions are for an operator to read and approve into
//! the controller's `instructions` by hand.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::classify::{Category, Classification};
use crate::cluster::{self, Item};
use crate::record::{ItemKind, RetroRecord};

/// What to include.
#[derive(Debug, Clone)]
pub struct ViewOptions {
    /// Only retrospectives written at or after this.
    pub since: Option<DateTime<Utc>>,
    /// The end of the range, and of the trend's window.
    pub until: DateTime<Utc>,
    /// The trend's window: the last `window` before `until` against the
    /// rate before it.
    pub window: Duration,
    /// Only this repository (exact, or a substring of its URL).
    pub repository: Option<String>,
    /// Only runs of this category or family (`infrastructure`, `tooling`…).
    pub category: Option<String>,
    /// Only runs driven by this model (its name exactly, `rules`, or
    /// `model` for runs whose model's name is not known).
    pub model: Option<String>,
    /// Example runs listed per cluster.
    pub examples: usize,
}

/// Where a cluster is heading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Nothing of it before the window.
    New,
    /// At least twice the earlier rate in the window.
    Rising,
    /// At most half the earlier rate.
    Falling,
    /// Neither.
    Steady,
}

impl Direction {
    /// Its name, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::New => "new",
            Direction::Rising => "rising",
            Direction::Falling => "falling",
            Direction::Steady => "steady",
        }
    }
}

/// A cluster's trend.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trend {
    /// Items in the window.
    pub recent: usize,
    /// Runs with an item in the window.
    pub recent_runs: usize,
    /// Items the earlier rate predicts for a window.
    pub expected: f64,
    /// The verdict.
    pub direction: Direction,
}

/// One cluster as the operator sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterView {
    /// Its most frequent wording.
    pub representative: String,
    /// Items in it.
    pub count: usize,
    /// Distinct runs.
    pub runs: usize,
    /// The most common category of its runs, and the rule that decided it.
    pub category: Category,
    /// That rule.
    pub rule: &'static str,
    /// Which lists its items came from.
    pub kinds: Vec<ItemKind>,
    /// First and last seen.
    pub first_seen: DateTime<Utc>,
    /// Last seen.
    pub last_seen: DateTime<Utc>,
    /// Repositories it was seen in, most affected first.
    pub repositories: Vec<String>,
    /// Some of its runs, newest first.
    pub example_runs: Vec<String>,
    /// Where it is heading.
    pub trend: Trend,
    /// The known problem's signature that merged its wordings, when one
    /// did ([`crate::signature`]).
    pub signature: Option<String>,
}

/// A repository where trouble concentrates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HotSpot {
    /// The repository.
    pub repository: String,
    /// Its runs in range.
    pub runs: usize,
    /// Of those, with problems.
    pub troubled_runs: usize,
    /// Categories of its troubled runs, most common first.
    pub categories: Vec<(Category, usize)>,
    /// Its most common cluster's representative.
    pub top_problem: String,
}

impl HotSpot {
    /// `infrastructure.network 2, tooling 1`.
    fn category_counts(&self) -> String {
        self.categories.iter().map(|(c, n)| format!("{c} {n}")).collect::<Vec<_>>().join(", ")
    }
}

/// A tool runs kept missing: a candidate for the guest image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolNeed {
    /// The tool, as the runs named it.
    pub tool: String,
    /// Runs that missed it.
    pub runs: usize,
    /// How they said it.
    pub representative: String,
}

/// Draft repository instructions from recurring missing context; for an
/// operator to approve, never applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstructionDraft {
    /// The repository.
    pub repository: String,
    /// Runs that missed it.
    pub runs: usize,
    /// What they missed, in their words.
    pub missing: String,
    /// The draft.
    pub draft: String,
}

/// The fleet view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetView {
    /// Start of the range (the oldest retrospective when not given).
    pub since: Option<DateTime<Utc>>,
    /// End of the range.
    pub until: DateTime<Utc>,
    /// The trend window, in hours.
    pub window_hours: i64,
    /// Runs in range.
    pub runs: usize,
    /// Of those, with problems.
    pub troubled_runs: usize,
    /// Runs per category.
    pub categories: BTreeMap<Category, usize>,
    /// Runs per model (`rules` for the deterministic path).
    pub models: BTreeMap<String, usize>,
    /// Clusters, ranked by count, then trend.
    pub clusters: Vec<ClusterView>,
    /// Repositories, most troubled first.
    pub hot_spots: Vec<HotSpot>,
    /// Tools for the guest image.
    pub missing_tools: Vec<ToolNeed>,
    /// Instructions to consider.
    pub instruction_drafts: Vec<InstructionDraft>,
}

/// Builds the view of `records` (each with its classification): their
/// problem items clustered within each category, ranked by count, then
/// trend.
pub fn condense(records: &[(RetroRecord, Classification)], options: &ViewOptions) -> FleetView {
    let selected: Vec<&(RetroRecord, Classification)> = records
        .iter()
        .filter(|(r, _)| {
            options.since.is_none_or(|since| r.created_at >= since) && r.created_at <= options.until
        })
        .filter(|(r, _)| {
            options
                .repository
                .as_deref()
                .is_none_or(|repo| r.repository == repo || r.repository.contains(repo))
        })
        .filter(|(_, c)| options.category.as_deref().is_none_or(|filter| c.category.matches(filter)))
        .filter(|(r, _)| options.model.as_deref().is_none_or(|model| r.model == model))
        .collect();
    let mut categories: BTreeMap<Category, usize> = BTreeMap::new();
    let mut models: BTreeMap<String, usize> = BTreeMap::new();
    for (r, c) in &selected {
        *categories.entry(c.category).or_default() += 1;
        let model = if r.model.is_empty() { "unknown" } else { r.model.as_str() };
        *models.entry(model.to_owned()).or_default() += 1;
    }
    let mut items: Vec<Item<'_>> = Vec::new();
    let mut kinds: Vec<ItemKind> = Vec::new();
    for (owner, (record, _)) in selected.iter().enumerate() {
        for (kind, text) in record.items() {
            items.push(Item { text, owner });
            kinds.push(kind);
        }
    }
    let start = options.since.or_else(|| selected.iter().map(|(r, _)| r.created_at).min());
    let window_start = options.until - options.window;
    // Items are clustered within their run's category: two problems the
    // rules tell apart (a tag that does not exist, a registry that wants
    // credentials) stay apart however alike their error lines read.
    let mut by_category: BTreeMap<Category, Vec<usize>> = BTreeMap::new();
    for (index, item) in items.iter().enumerate() {
        by_category.entry(selected[item.owner].1.category).or_default().push(index);
    }
    let mut clusters = Vec::new();
    let mut instruction_drafts = Vec::new();
    for indexes in by_category.values() {
        let group: Vec<Item<'_>> = indexes.iter().map(|&i| items[i].clone()).collect();
        let signatures: Vec<Option<String>> =
            indexes.iter().map(|&i| crate::signature::signature(kinds[i], items[i].text)).collect();
        for mut found in cluster::cluster_signed(&group, &signatures) {
            for item in &mut found.items {
                *item = indexes[*item];
            }
            instruction_drafts.extend(drafts_of(&found, &items, &kinds, &selected));
            clusters.push(cluster_view(&found, &items, &kinds, &selected, options, start, window_start));
        }
    }
    instruction_drafts.sort_by(|a, b| b.runs.cmp(&a.runs).then_with(|| a.repository.cmp(&b.repository)));
    clusters.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| rank(a.trend.direction).cmp(&rank(b.trend.direction)))
            .then_with(|| a.representative.cmp(&b.representative))
    });

    let hot_spots = hot_spots(&selected, &clusters);
    let missing_tools = tool_needs(&clusters);
    FleetView {
        since: start,
        until: options.until,
        window_hours: options.window.num_hours(),
        runs: selected.len(),
        troubled_runs: selected.iter().filter(|(r, _)| r.has_problems()).count(),
        categories,
        models,
        clusters,
        hot_spots,
        missing_tools,
        instruction_drafts,
    }
}

fn rank(direction: Direction) -> u8 {
    match direction {
        Direction::Rising => 0,
        Direction::New => 1,
        Direction::Steady => 2,
        Direction::Falling => 3,
    }
}

fn cluster_view(
    cluster: &cluster::Cluster,
    items: &[Item<'_>],
    kinds: &[ItemKind],
    selected: &[&(RetroRecord, Classification)],
    options: &ViewOptions,
    start: Option<DateTime<Utc>>,
    window_start: DateTime<Utc>,
) -> ClusterView {
    let mut wordings: BTreeMap<&str, usize> = BTreeMap::new();
    let mut owners: BTreeSet<usize> = BTreeSet::new();
    let mut item_kinds: BTreeSet<ItemKind> = BTreeSet::new();
    for &i in &cluster.items {
        *wordings.entry(items[i].text).or_default() += 1;
        owners.insert(items[i].owner);
        item_kinds.insert(kinds[i]);
    }
    let representative = wordings
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.len().cmp(&a.0.len())).then_with(|| b.0.cmp(a.0)))
        .map(|(text, _)| (*text).to_owned())
        .unwrap_or_default();
    let times: Vec<DateTime<Utc>> =
        cluster.items.iter().map(|&i| selected[items[i].owner].0.created_at).collect();
    let first_seen = times.iter().min().copied().unwrap_or(options.until);
    let last_seen = times.iter().max().copied().unwrap_or(options.until);
    let mut by_category: BTreeMap<(Category, &'static str), usize> = BTreeMap::new();
    let mut repositories: BTreeMap<&str, usize> = BTreeMap::new();
    for &owner in &owners {
        let (record, classification) = selected[owner];
        *by_category.entry((classification.category, classification.rule)).or_default() += 1;
        if !record.repository.is_empty() {
            *repositories.entry(record.repository.as_str()).or_default() += 1;
        }
    }
    let ((category, rule), _) = by_category
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .unwrap_or(((Category::None, "none"), 0));
    let mut repositories: Vec<(&str, usize)> = repositories.into_iter().collect();
    repositories.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut examples: Vec<&RetroRecord> = owners.iter().map(|&o| &selected[o].0).collect();
    examples.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.run_id.cmp(&b.run_id)));
    ClusterView {
        representative,
        count: cluster.items.len(),
        runs: owners.len(),
        category,
        rule,
        kinds: item_kinds.into_iter().collect(),
        first_seen,
        last_seen,
        repositories: repositories.into_iter().map(|(r, _)| r.to_owned()).collect(),
        example_runs: examples.iter().take(options.examples).map(|r| r.run_id.clone()).collect(),
        trend: Trend {
            recent_runs: owners
                .iter()
                .map(|&o| selected[o].0.created_at)
                .filter(|t| *t > window_start && *t <= options.until)
                .count(),
            ..trend(&times, start, window_start, options)
        },
        signature: cluster.signature.clone(),
    }
}

/// The window's count against the rate before it.
fn trend(
    times: &[DateTime<Utc>],
    start: Option<DateTime<Utc>>,
    window_start: DateTime<Utc>,
    options: &ViewOptions,
) -> Trend {
    let recent = times.iter().filter(|t| **t > window_start && **t <= options.until).count();
    let earlier = times.iter().filter(|t| **t <= window_start).count();
    let earlier_span = start.map_or(Duration::zero(), |s| window_start - s);
    let expected = if earlier_span > Duration::zero() {
        earlier as f64 * options.window.num_seconds() as f64 / earlier_span.num_seconds() as f64
    } else {
        0.0
    };
    let direction = if earlier == 0 {
        Direction::New
    } else if recent as f64 >= (2.0 * expected).max(2.0) {
        Direction::Rising
    } else if expected >= 1.0 && recent as f64 <= expected / 2.0 {
        Direction::Falling
    } else {
        Direction::Steady
    };
    Trend { recent, recent_runs: 0, expected: (expected * 10.0).round() / 10.0, direction }
}

fn hot_spots(selected: &[&(RetroRecord, Classification)], clusters: &[ClusterView]) -> Vec<HotSpot> {
    let mut per_repo: BTreeMap<&str, (usize, usize, BTreeMap<Category, usize>)> = BTreeMap::new();
    for (record, classification) in selected {
        if record.repository.is_empty() {
            continue;
        }
        let entry = per_repo.entry(record.repository.as_str()).or_default();
        entry.0 += 1;
        if record.has_problems() {
            entry.1 += 1;
            *entry.2.entry(classification.category).or_default() += 1;
        }
    }
    let mut spots: Vec<HotSpot> = per_repo
        .into_iter()
        .filter(|(_, (_, troubled, _))| *troubled > 0)
        .map(|(repository, (runs, troubled_runs, categories))| {
            let mut categories: Vec<(Category, usize)> = categories.into_iter().collect();
            categories.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let top_problem = clusters
                .iter()
                .find(|c| c.repositories.first().map(String::as_str) == Some(repository))
                .or_else(|| clusters.iter().find(|c| c.repositories.iter().any(|r| r == repository)))
                .map(|c| c.representative.clone())
                .unwrap_or_default();
            HotSpot { repository: repository.to_owned(), runs, troubled_runs, categories, top_problem }
        })
        .collect();
    spots.sort_by(|a, b| b.troubled_runs.cmp(&a.troubled_runs).then_with(|| a.repository.cmp(&b.repository)));
    spots
}

/// Tools runs kept missing: the tooling clusters of missing tools by the
/// tool they name (its signature's, else the first word of its wording; one
/// tool's differently worded clusters counted together), of two runs or
/// more, most runs first. A tooling run's other items (what went wrong
/// meanwhile) name no tool.
fn tool_needs(clusters: &[ClusterView]) -> Vec<ToolNeed> {
    let mut by_tool: BTreeMap<String, ToolNeed> = BTreeMap::new();
    for c in clusters
        .iter()
        .filter(|c| c.category == Category::Tooling && c.kinds.contains(&ItemKind::MissingTool))
    {
        let tool = c
            .signature
            .as_deref()
            .and_then(|s| s.strip_prefix(crate::signature::MISSING_TOOL))
            .map(str::to_owned)
            .unwrap_or_else(|| crate::signature::tool_name(&c.representative));
        let need = by_tool.entry(tool.clone()).or_insert_with(|| ToolNeed {
            tool,
            runs: 0,
            representative: c.representative.clone(),
        });
        need.runs += c.runs;
    }
    let mut needs: Vec<ToolNeed> = by_tool.into_values().filter(|n| n.runs >= 2).collect();
    needs.sort_by(|a, b| b.runs.cmp(&a.runs).then_with(|| a.tool.cmp(&b.tool)));
    needs
}

/// Drafts from one cluster: its missing-context items grouped by
/// repository, for each repository where two runs or more missed it.
fn drafts_of(
    cluster: &cluster::Cluster,
    items: &[Item<'_>],
    kinds: &[ItemKind],
    selected: &[&(RetroRecord, Classification)],
) -> Vec<InstructionDraft> {
    let mut per_repo: BTreeMap<&str, (BTreeSet<usize>, &str)> = BTreeMap::new();
    for &i in &cluster.items {
        let repository = selected[items[i].owner].0.repository.as_str();
        if kinds[i] == ItemKind::MissingContext && !repository.is_empty() {
            let entry = per_repo.entry(repository).or_insert((BTreeSet::new(), items[i].text));
            entry.0.insert(items[i].owner);
        }
    }
    per_repo
        .into_iter()
        .filter(|(_, (runs, _))| runs.len() >= 2)
        .map(|(repository, (runs, missing))| InstructionDraft {
            repository: repository.to_owned(),
            runs: runs.len(),
            draft: format!(
                "{} runs on this repository lacked this; if the answer holds for every run, state it in the repository's instructions: \"{missing}\"",
                runs.len()
            ),
            missing: missing.to_owned(),
        })
        .collect()
}

/// The view as text for a terminal.
pub fn render_text(view: &FleetView) -> String {
    let mut out = String::new();
    let since = view.since.map_or("the start".to_owned(), |s| s.format("%Y-%m-%d %H:%M").to_string());
    out.push_str(&format!(
        "{} runs from {since} to {} ({} with problems); trends over the last {} h\n\n",
        view.runs,
        view.until.format("%Y-%m-%d %H:%M"),
        view.troubled_runs,
        view.window_hours
    ));
    out.push_str("BY CATEGORY\n");
    for (category, n) in &view.categories {
        out.push_str(&format!("  {:<28} {n}\n", category.as_str()));
    }
    out.push_str("\nBY MODEL\n");
    for (model, n) in &view.models {
        out.push_str(&format!("  {:<28} {n}\n", one_line(model, 28)));
    }
    out.push_str("\nCLUSTERS\n");
    for c in &view.clusters {
        out.push_str(&format!(
            "  {:>4}  {:<8} {:<26} {}\n        runs {}, first {}, last {}, {} repositor{} (rule {}{}); e.g. {}\n",
            c.count,
            c.trend.direction.as_str(),
            c.category.as_str(),
            one_line(&c.representative, 100),
            c.runs,
            c.first_seen.format("%Y-%m-%d"),
            c.last_seen.format("%Y-%m-%d"),
            c.repositories.len(),
            if c.repositories.len() == 1 { "y" } else { "ies" },
            c.rule,
            c.signature.as_deref().map(|s| format!("; signature {s}")).unwrap_or_default(),
            c.example_runs.join(", ")
        ));
    }
    out.push_str("\nHOT SPOTS\n");
    for h in view.hot_spots.iter().take(10) {
        let categories = h.category_counts();
        out.push_str(&format!(
            "  {}  {}/{} runs with problems: {}\n        {}\n",
            h.repository,
            h.troubled_runs,
            h.runs,
            categories,
            one_line(&h.top_problem, 100)
        ));
    }
    if !view.missing_tools.is_empty() {
        out.push_str("\nTOOLS TO CONSIDER FOR THE GUEST IMAGE\n");
        for t in &view.missing_tools {
            out.push_str(&format!(
                "  {:<20} {} runs  ({})\n",
                t.tool,
                t.runs,
                one_line(&t.representative, 70)
            ));
        }
    }
    if !view.instruction_drafts.is_empty() {
        out.push_str("\nDRAFT REPOSITORY INSTRUCTIONS (for an operator to approve; never applied)\n");
        for d in &view.instruction_drafts {
            out.push_str(&format!("  {}\n        {}\n", d.repository, d.draft));
        }
    }
    out
}

/// The view as Markdown, for a digest or an issue.
pub fn render_markdown(view: &FleetView) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Fleet retrospectives\n\n{} runs, {} with problems, until {}; trends over the last {} hours.\n\n",
        view.runs,
        view.troubled_runs,
        view.until.format("%Y-%m-%d %H:%M UTC"),
        view.window_hours
    ));
    out.push_str("## Models\n\n| Model | Runs |\n|---|---:|\n");
    for (model, n) in &view.models {
        out.push_str(&format!("| {} | {n} |\n", markdown_cell(model)));
    }
    out.push_str("\n## Clusters\n\n| Count | Trend | Category | Problem | Repositories | Last seen |\n|---:|---|---|---|---:|---|\n");
    for c in &view.clusters {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            c.count,
            c.trend.direction.as_str(),
            c.category,
            markdown_cell(&c.representative),
            c.repositories.len(),
            c.last_seen.format("%Y-%m-%d")
        ));
    }
    out.push_str("\n## Hot spots\n\n| Repository | Runs with problems | Categories |\n|---|---:|---|\n");
    for h in &view.hot_spots {
        let categories = h.category_counts();
        out.push_str(&format!(
            "| {} | {}/{} | {} |\n",
            markdown_cell(&h.repository),
            h.troubled_runs,
            h.runs,
            categories
        ));
    }
    if !view.missing_tools.is_empty() {
        out.push_str("\n## Tools to consider for the guest image\n\n");
        for t in &view.missing_tools {
            out.push_str(&format!("- `{}`: {} runs\n", markdown_cell(&t.tool), t.runs));
        }
    }
    if !view.instruction_drafts.is_empty() {
        out.push_str("\n## Draft repository instructions (never applied without an operator)\n\n");
        for d in &view.instruction_drafts {
            out.push_str(&format!("- {}: {}\n", markdown_cell(&d.repository), markdown_cell(&d.draft)));
        }
    }
    out
}

/// Retrospective text is from guests: one line, cut, in a table cell with
/// its pipes and markup characters escaped.
fn markdown_cell(text: &str) -> String {
    let line = one_line(text, 160);
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if "|\\`*_[]<>#".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;
    use crate::classify::classify;

    fn record(
        run: &str,
        repository: &str,
        day: u32,
        context: &[&str],
        wrong: &[&str],
    ) -> (RetroRecord, Classification) {
        let record = RetroRecord {
            run_id: run.into(),
            repository: repository.into(),
            outcome: "agent_failed".into(),
            model: "gpt-5".into(),
            created_at: Utc.with_ymd_and_hms(2026, 11, day, 12, 0, 0).single().unwrap_or_default(),
            missing_context: context.iter().map(|s| (*s).to_owned()).collect(),
            went_wrong: wrong.iter().map(|s| (*s).to_owned()).collect(),
            ..RetroRecord::default()
        };
        let classification = classify(&record);
        (record, classification)
    }

    fn options() -> ViewOptions {
        ViewOptions {
            since: None,
            until: Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).single().unwrap_or_default(),
            window: Duration::days(7),
            repository: None,
            category: None,
            model: None,
            examples: 3,
        }
    }

    /// Context one repository's runs kept missing becomes a draft for that
    /// repository, once; context missed once, or in another repository,
    /// does not.
    #[test]
    fn recurring_missing_context_becomes_a_draft_for_its_repository() {
        let api = "https://github.com/acme/api";
        let web = "https://github.com/acme/web";
        let branch = "which release branch (release/2.x or main) security fixes go to";
        let records = vec![
            record("r1", api, 3, &[branch], &[]),
            record("r2", api, 10, &["which release branch (release/3.x or main) security fixes go to"], &[]),
            record("r3", web, 12, &[branch], &[]),
            record("r4", api, 20, &["the internal apk mirror's URL"], &[]),
        ];
        let view = condense(&records, &options());
        assert_eq!(view.instruction_drafts.len(), 1, "{:#?}", view.instruction_drafts);
        let draft = &view.instruction_drafts[0];
        assert_eq!((draft.repository.as_str(), draft.runs), (api, 2));
        assert!(draft.draft.contains("release branch"), "{}", draft.draft);
        assert_eq!(view.categories.get(&Category::Context), Some(&4));
    }

    /// Guest text stays one line in a Markdown cell, its markup escaped.
    #[test]
    fn markdown_escapes_guest_text() {
        let records = vec![record(
            "r1",
            "https://github.com/acme/api",
            5,
            &[],
            &["| injected | row |\n# heading <img src=x>"],
        )];
        let markdown = render_markdown(&condense(&records, &options()));
        assert!(markdown.contains("\\| injected \\| row \\| \\# heading \\<img src=x\\>"), "{markdown}");
        assert!(!markdown.contains("\n# heading"), "{markdown}");
    }

    /// The filters: a repository by part of its URL, a category by its
    /// family, a range by `since`.
    #[test]
    fn filters_narrow_the_view() {
        let records = vec![
            record("r1", "https://github.com/acme/api", 3, &[], &["proxy.golang.org: i/o timeout"]),
            record("r2", "https://github.com/acme/web", 20, &[], &["toomanyrequests: pull rate limit"]),
        ];
        let mut only = options();
        only.repository = Some("acme/web".into());
        assert_eq!(condense(&records, &only).runs, 1);
        let mut only = options();
        only.category = Some("infrastructure".into());
        assert_eq!(condense(&records, &only).runs, 2);
        only.category = Some("infrastructure.network".into());
        assert_eq!(condense(&records, &only).runs, 1);
        let mut only = options();
        only.model = Some("gpt-4.1-mini".into());
        assert_eq!(condense(&records, &only).runs, 0);
        only.model = Some("gpt-5".into());
        let view = condense(&records, &only);
        assert_eq!(view.runs, 2);
        assert_eq!(view.models.get("gpt-5"), Some(&2));
        assert!(render_text(&view).contains("BY MODEL\n  gpt-5"), "{}", render_text(&view));
        let mut only = options();
        only.since = Some(Utc.with_ymd_and_hms(2026, 11, 10, 0, 0, 0).single().unwrap_or_default());
        assert_eq!(condense(&records, &only).runs, 1);
    }
}

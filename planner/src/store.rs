//! The planner's writes: one transaction per batch of assessments.
//!
//! The steps, in lock order (every planner takes locks in the same order,
//! so two planners on overlapping work wait rather than deadlock; a deadlock
//! Postgres still detects is retried by the bus):
//!
//! 1. insert the assessments; ids already present are resubmissions and
//!    change nothing further;
//! 2. upsert images, then findings (sorted by key);
//! 3. upsert image references with their mapping;
//! 4. lock every affected target (advisory lock on repo/Dockerfile/branch);
//! 5. recompute each target's actionable finding set from all images that
//!    map to it, under policy;
//! 6. create or update the open remediation and write the job to the outbox.
//!
//! The caller publishes the returned jobs after commit and marks them
//! published; [`unpublished_jobs`] finds any a crash left behind.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use patchpilot_model::{
    Assessment, Cvss, Finding, FindingKey, ImageSummary, JobReason, Package, RemediationId, RemediationJob,
    RemediationState, RepositoryTarget, Severity,
};
use sqlx::{FromRow, PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::mapping::Mapping;
use crate::policy::Policy;

/// One decoded, mapped assessment ready to be written.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// Content-derived id.
    pub assessment_id: String,
    /// The assessment.
    pub assessment: Assessment,
    /// Trace id of the submitter's span.
    pub trace_id: Option<String>,
    /// `traceparent` of this message's receive span, for the jobs it causes.
    pub traceparent: Option<String>,
    /// When it was put on the bus.
    pub submitted_at: Option<DateTime<Utc>>,
    /// Where the image maps to.
    pub mapping: Mapping,
    /// Labels read from the registry for this message, to be remembered.
    pub fetched_labels: Option<BTreeMap<String, String>>,
}

/// A job written to the outbox, to publish after commit.
#[derive(Debug, Clone)]
pub struct PendingJob {
    /// The job.
    pub job: RemediationJob,
    /// Trace context to continue.
    pub traceparent: Option<String>,
}

/// What a batch did.
#[derive(Debug, Default)]
pub struct BatchResult {
    /// Assessments that were new (not resubmissions).
    pub new_assessments: usize,
    /// Finding rows inserted or changed.
    pub findings_written: u64,
    /// Jobs to publish.
    pub jobs: Vec<PendingJob>,
    /// Images recorded as unmapped.
    pub unmapped: usize,
}

type GroupKey = (String, String, String);

fn group_key(t: &RepositoryTarget) -> GroupKey {
    t.group_key()
}

/// Text form of a group key for advisory locks. Newlines cannot occur in
/// URLs, paths or branch names as stored.
fn lock_text(k: &GroupKey) -> String {
    format!("{}\n{}\n{}", k.0, k.1, k.2)
}

#[derive(Debug, FromRow)]
struct RefRow {
    reference: String,
    digest: String,
    repo_url: Option<String>,
    dockerfile: Option<String>,
    build_context: Option<String>,
    branch: Option<String>,
    revision: Option<String>,
    mapped_by: Option<String>,
    updated_at: DateTime<Utc>,
}

#[derive(Debug, FromRow)]
struct FindingRow {
    image_digest: String,
    vulnerability_id: String,
    package_name: String,
    package_path: String,
    aliases: serde_json::Value,
    source_package: String,
    source_version: String,
    package_type: String,
    ecosystem: String,
    installed_version: String,
    fixed_versions: serde_json::Value,
    severity: i16,
    cvss: serde_json::Value,
    layer_digest: String,
    purl: String,
    title: String,
}

impl FindingRow {
    fn into_finding(self) -> (String, Finding) {
        let strings = |v: serde_json::Value| serde_json::from_value::<Vec<String>>(v).unwrap_or_default();
        let finding = Finding {
            id: self.vulnerability_id,
            aliases: strings(self.aliases),
            package: Package {
                name: self.package_name,
                version: self.installed_version,
                kind: self.package_type,
                ecosystem: self.ecosystem,
                source_name: self.source_package,
                source_version: self.source_version,
                path: self.package_path,
                layer: self.layer_digest,
                purl: self.purl,
            },
            fixed_versions: strings(self.fixed_versions),
            severity: Severity::from_rank(self.severity),
            cvss: serde_json::from_value::<Vec<Cvss>>(self.cvss).unwrap_or_default(),
            title: self.title,
        };
        (self.image_digest, finding)
    }
}

#[derive(Debug, FromRow)]
struct OpenRemediation {
    id: Uuid,
    repo_url: String,
    dockerfile: String,
    branch: String,
    revision: i32,
    finding_set_digest: String,
    images: serde_json::Value,
}

/// The stored identity of a finding within an image.
type RowKey<'a> = (&'a str, &'a str, &'a str, &'a str);

fn row_key<'a>(digest: &'a str, f: &'a Finding) -> RowKey<'a> {
    (digest, &f.id, &f.package.name, &f.package.path)
}

/// Writes one batch. See the module docs for the steps.
pub async fn ingest_batch(
    pool: &PgPool,
    batch: &[Incoming],
    policy: &Policy,
    today: NaiveDate,
) -> Result<BatchResult, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut result = BatchResult::default();

    // 1. Assessments: resubmissions stop here.
    let mut seen = HashSet::new();
    let candidates: Vec<&Incoming> = batch.iter().filter(|i| seen.insert(i.assessment_id.clone())).collect();
    let new_ids: HashSet<String> = sqlx::query_scalar(
        "INSERT INTO assessments (id, image_digest, image_ref, source_format, scanner, finding_count,
                                  trace_id, scanned_at, submitted_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[],
                              $7::text[], $8::timestamptz[], $9::timestamptz[])
         ON CONFLICT (id) DO NOTHING
         RETURNING id",
    )
    .bind(candidates.iter().map(|i| i.assessment_id.clone()).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.assessment.digest.to_string()).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.assessment.image.clone()).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.assessment.source_format.clone()).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.assessment.scanner.clone()).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.assessment.findings.len() as i32).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.trace_id.clone()).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.assessment.scanned_at).collect::<Vec<_>>())
    .bind(candidates.iter().map(|i| i.submitted_at).collect::<Vec<_>>())
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .collect();
    let fresh: Vec<&Incoming> =
        candidates.into_iter().filter(|i| new_ids.contains(&i.assessment_id)).collect();
    result.new_assessments = fresh.len();
    if fresh.is_empty() {
        tx.commit().await?;
        return Ok(result);
    }

    // 2a. Images, one row per digest (the last assessment in the batch wins).
    let mut images: BTreeMap<String, &Incoming> = BTreeMap::new();
    for i in &fresh {
        images.insert(i.assessment.digest.to_string(), i);
    }
    let inserted_digests: HashSet<String> = sqlx::query_as::<_, (String, bool)>(
        "INSERT INTO images (digest, os_family, os_version, os_ecosystem, platform, labels, labels_fetched_at)
         SELECT d, f, v, e, p, l::jsonb, CASE WHEN fetched THEN now() END
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[])
              AS t(d, f, v, e, p, l, fetched)
         ON CONFLICT (digest) DO UPDATE SET
             last_assessed_at = now(),
             os_family = CASE WHEN EXCLUDED.os_family <> '' THEN EXCLUDED.os_family ELSE images.os_family END,
             os_version = CASE WHEN EXCLUDED.os_version <> '' THEN EXCLUDED.os_version ELSE images.os_version END,
             os_ecosystem = CASE WHEN EXCLUDED.os_ecosystem <> '' THEN EXCLUDED.os_ecosystem ELSE images.os_ecosystem END,
             platform = CASE WHEN EXCLUDED.platform <> '' THEN EXCLUDED.platform ELSE images.platform END,
             labels = CASE WHEN EXCLUDED.labels <> '{}'::jsonb THEN EXCLUDED.labels ELSE images.labels END,
             labels_fetched_at = COALESCE(EXCLUDED.labels_fetched_at, images.labels_fetched_at)
         RETURNING digest, (xmax = 0)",
    )
    .bind(images.keys().cloned().collect::<Vec<_>>())
    .bind(images.values().map(|i| i.assessment.os.as_ref().map(|o| o.family.clone()).unwrap_or_default()).collect::<Vec<_>>())
    .bind(images.values().map(|i| i.assessment.os.as_ref().map(|o| o.version.clone()).unwrap_or_default()).collect::<Vec<_>>())
    .bind(images.values().map(|i| i.assessment.os.as_ref().map(|o| o.ecosystem.clone()).unwrap_or_default()).collect::<Vec<_>>())
    .bind(images.values().map(|i| i.assessment.platform.as_ref().map(|p| p.to_string()).unwrap_or_default()).collect::<Vec<_>>())
    .bind(
        images
            .values()
            .map(|i| {
                json_text(i.fetched_labels.as_ref().unwrap_or(&i.assessment.labels))
            })
            .collect::<Vec<_>>(),
    )
    .bind(images.values().map(|i| i.fetched_labels.is_some()).collect::<Vec<_>>())
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .filter_map(|(digest, inserted)| inserted.then_some(digest))
    .collect();

    // 2b. Findings, deduplicated by their stored key.
    let mut rows: BTreeMap<RowKey, &Finding> = BTreeMap::new();
    for i in &fresh {
        let digest = i.assessment.digest.as_str();
        for f in &i.assessment.findings {
            rows.insert(row_key(digest, f), f);
        }
    }
    result.findings_written = write_findings(&mut tx, &rows).await?;

    // 3. References and their mapping; remember where they pointed before.
    let mut refs: BTreeMap<String, &Incoming> = BTreeMap::new();
    for i in &fresh {
        refs.insert(i.assessment.image.clone(), i);
    }
    let previous: Vec<(Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT repo_url, dockerfile, branch FROM image_refs WHERE reference = ANY($1) FOR UPDATE",
    )
    .bind(refs.keys().cloned().collect::<Vec<_>>())
    .fetch_all(&mut *tx)
    .await?;
    let mapped = |i: &Incoming| match &i.mapping {
        Mapping::Mapped { target, mapped_by } => Some((target.clone(), mapped_by.clone())),
        Mapping::Unmapped { .. } => None,
    };
    result.unmapped = refs.values().filter(|i| mapped(i).is_none()).count();
    let opt = |f: &dyn Fn(&RepositoryTarget) -> String| {
        refs.values().map(|i| mapped(i).map(|(t, _)| f(&t))).collect::<Vec<Option<String>>>()
    };
    sqlx::query(
        "INSERT INTO image_refs (reference, digest, repo_url, dockerfile, build_context, branch, revision,
                                 mapped_by, unmapped_reason, updated_at)
         SELECT r, d, u, f, c, b, v, m, x, now()
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::text[], $9::text[]) AS t(r, d, u, f, c, b, v, m, x)
         ON CONFLICT (reference) DO UPDATE SET
             digest = EXCLUDED.digest, repo_url = EXCLUDED.repo_url, dockerfile = EXCLUDED.dockerfile,
             build_context = EXCLUDED.build_context, branch = EXCLUDED.branch, revision = EXCLUDED.revision,
             mapped_by = EXCLUDED.mapped_by, unmapped_reason = EXCLUDED.unmapped_reason, updated_at = now()",
    )
    .bind(refs.keys().cloned().collect::<Vec<_>>())
    .bind(refs.values().map(|i| i.assessment.digest.to_string()).collect::<Vec<_>>())
    .bind(opt(&|t| t.repo_url.clone()))
    .bind(opt(&|t| t.dockerfile.clone()))
    .bind(opt(&|t| t.context.clone()))
    .bind(opt(&|t| t.branch.clone()))
    .bind(opt(&|t| t.revision.clone()))
    .bind(refs.values().map(|i| mapped(i).map(|(_, by)| by)).collect::<Vec<_>>())
    .bind(
        refs.values()
            .map(|i| match &i.mapping {
                Mapping::Unmapped { reason } => Some(reason.clone()),
                Mapping::Mapped { .. } => None,
            })
            .collect::<Vec<_>>(),
    )
    .execute(&mut *tx)
    .await?;

    // 4. Lock every affected target.
    let mut groups: BTreeSet<GroupKey> = BTreeSet::new();
    for i in refs.values() {
        if let Some((t, _)) = mapped(i) {
            groups.insert(group_key(&t));
        }
    }
    for (u, f, b) in previous {
        if let (Some(u), Some(f), Some(b)) = (u, f, b) {
            groups.insert((u, f, b));
        }
    }
    if groups.is_empty() {
        tx.commit().await?;
        return Ok(result);
    }
    let mut lock_keys: Vec<String> = groups.iter().map(lock_text).collect();
    lock_keys.sort();
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended(k, 7)) FROM unnest($1::text[]) WITH ORDINALITY AS t(k, n) ORDER BY n")
        .bind(&lock_keys)
        .execute(&mut *tx)
        .await?;

    // 5. Recompute finding sets of the affected targets.
    let (us, fs, bs) = unzip3(&groups);
    let group_refs: Vec<RefRow> = sqlx::query_as(
        "SELECT reference, digest, repo_url, dockerfile, build_context, branch, revision, mapped_by, updated_at
         FROM image_refs
         WHERE (repo_url, dockerfile, branch) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))",
    )
    .bind(&us)
    .bind(&fs)
    .bind(&bs)
    .fetch_all(&mut *tx)
    .await?;
    let digests: BTreeSet<&str> = group_refs.iter().map(|r| r.digest.as_str()).collect();
    // Images first seen in this batch have no findings but ours.
    let to_read: Vec<String> =
        digests.iter().filter(|d| !inserted_digests.contains(**d)).map(|d| (*d).to_owned()).collect();
    let mut loaded: Vec<(String, Finding)> = Vec::new();
    if !to_read.is_empty() {
        let stored: Vec<FindingRow> = sqlx::query_as(
            "SELECT image_digest, vulnerability_id, package_name, package_path, aliases, source_package,
                    source_version, package_type, ecosystem, installed_version, fixed_versions, severity,
                    cvss, layer_digest, purl, title
             FROM findings WHERE image_digest = ANY($1)",
        )
        .bind(&to_read)
        .fetch_all(&mut *tx)
        .await?;
        loaded = stored.into_iter().map(FindingRow::into_finding).collect();
    }
    let mut findings_by_digest: HashMap<&str, Vec<&Finding>> = HashMap::new();
    for ((digest, ..), f) in &rows {
        if inserted_digests.contains(*digest) {
            findings_by_digest.entry(digest).or_default().push(*f);
        }
    }
    for (digest, f) in &loaded {
        findings_by_digest.entry(digest.as_str()).or_default().push(f);
    }

    let mut sets: BTreeMap<GroupKey, TargetSet> = BTreeMap::new();
    for k in &groups {
        sets.insert(k.clone(), TargetSet::default());
    }
    for r in &group_refs {
        let (Some(u), Some(f), Some(b)) = (&r.repo_url, &r.dockerfile, &r.branch) else { continue };
        let Some(set) = sets.get_mut(&(u.clone(), f.clone(), b.clone())) else { continue };
        if set.newest.as_ref().is_none_or(|n| r.updated_at >= n.updated_at) {
            set.newest = Some(NewestRef {
                updated_at: r.updated_at,
                context: r.build_context.clone().unwrap_or_default(),
                revision: r.revision.clone().unwrap_or_default(),
            });
        }
        let mut contributed = false;
        for &finding in findings_by_digest.get(r.digest.as_str()).into_iter().flatten() {
            if policy.evaluate(&r.reference, &r.digest, finding, today).is_ok() {
                contributed = true;
                set.findings.entry(finding.set_key()).or_insert(finding);
            }
        }
        if contributed {
            set.images.insert(ImageSummary {
                image_ref: r.reference.clone(),
                image_digest: r.digest.clone(),
                mapped_by: r.mapped_by.clone().unwrap_or_default(),
            });
        }
    }

    // Trace context: the last assessment in the batch that touched a target.
    let mut traceparents: HashMap<GroupKey, Option<String>> = HashMap::new();
    for i in &fresh {
        if let Some((t, _)) = mapped(i) {
            traceparents.insert(group_key(&t), i.traceparent.clone());
        }
    }

    // 6. Remediations and the outbox.
    let open: Vec<OpenRemediation> = sqlx::query_as(
        "SELECT id, repo_url, dockerfile, branch, revision, finding_set_digest, images
         FROM remediations
         WHERE state <> ALL($4)
           AND (repo_url, dockerfile, branch) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
         FOR UPDATE",
    )
    .bind(&us)
    .bind(&fs)
    .bind(&bs)
    .bind(RemediationState::CLOSED.to_vec())
    .fetch_all(&mut *tx)
    .await?;
    let open: HashMap<GroupKey, OpenRemediation> =
        open.into_iter().map(|o| ((o.repo_url.clone(), o.dockerfile.clone(), o.branch.clone()), o)).collect();

    let now = Utc::now();
    let mut creates = Vec::new();
    let mut updates = Vec::new();
    for (key, set) in sets {
        let digest = RemediationJob::finding_set_digest(set.findings.keys());
        let images: Vec<ImageSummary> = set.images.into_iter().collect();
        let findings: Vec<Finding> = set.findings.into_values().cloned().collect();
        let newest = set.newest.unwrap_or_default();
        let target = RepositoryTarget {
            repo_url: key.0.clone(),
            dockerfile: key.1.clone(),
            context: newest.context,
            branch: key.2.clone(),
            revision: newest.revision,
        };
        let (remediation_id, revision, reason) = match open.get(&key) {
            None if findings.is_empty() => continue,
            None => (RemediationId::new(), 1u32, JobReason::New),
            Some(o) if o.finding_set_digest == digest => {
                let unchanged = serde_json::from_value::<Vec<ImageSummary>>(o.images.clone())
                    .is_ok_and(|stored| stored == images);
                if !unchanged {
                    updates.push((
                        o.id,
                        o.revision,
                        digest,
                        json_text(&findings),
                        json_text(&images),
                        target,
                    ));
                }
                continue;
            }
            Some(o) => (
                RemediationId(o.id),
                u32::try_from(o.revision).unwrap_or(0) + 1,
                if findings.is_empty() { JobReason::Resolved } else { JobReason::FindingsChanged },
            ),
        };
        let job = RemediationJob {
            job_id: RemediationJob::job_id_for(remediation_id, revision, &target, &digest),
            remediation_id,
            revision,
            target: target.clone(),
            findings,
            images,
            finding_set_digest: digest,
            reason,
            created_at: now,
        };
        let findings_json = json_text(&job.findings);
        let images_json = json_text(&job.images);
        if reason == JobReason::New {
            creates.push((job.clone(), findings_json, images_json));
        } else {
            updates.push((
                remediation_id.0,
                revision as i32,
                job.finding_set_digest.clone(),
                findings_json,
                images_json,
                target,
            ));
        }
        result.jobs.push(PendingJob { traceparent: traceparents.get(&key).cloned().flatten(), job });
    }

    if !creates.is_empty() {
        sqlx::query(
            "INSERT INTO remediations (id, repo_url, dockerfile, branch, build_context, source_revision,
                                       finding_set_digest, findings, images)
             SELECT id, u, f, b, c, v, d, fs::json, i::json
             FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                         $7::text[], $8::text[], $9::text[]) AS t(id, u, f, b, c, v, d, fs, i)",
        )
        .bind(creates.iter().map(|(j, ..)| j.remediation_id.0).collect::<Vec<_>>())
        .bind(creates.iter().map(|(j, ..)| j.target.repo_url.clone()).collect::<Vec<_>>())
        .bind(creates.iter().map(|(j, ..)| j.target.dockerfile.clone()).collect::<Vec<_>>())
        .bind(creates.iter().map(|(j, ..)| j.target.branch.clone()).collect::<Vec<_>>())
        .bind(creates.iter().map(|(j, ..)| j.target.context.clone()).collect::<Vec<_>>())
        .bind(creates.iter().map(|(j, ..)| j.target.revision.clone()).collect::<Vec<_>>())
        .bind(creates.iter().map(|(j, ..)| j.finding_set_digest.clone()).collect::<Vec<_>>())
        .bind(creates.iter().map(|(_, f, _)| f.clone()).collect::<Vec<_>>())
        .bind(creates.iter().map(|(_, _, i)| i.clone()).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO remediation_history (remediation_id, from_state, to_state, reason)
             SELECT id, NULL, 'queued', r FROM unnest($1::uuid[], $2::text[]) AS t(id, r)",
        )
        .bind(creates.iter().map(|(j, ..)| j.remediation_id.0).collect::<Vec<_>>())
        .bind(
            creates
                .iter()
                .map(|(j, ..)| {
                    format!("planner: {} finding(s) from {} image(s)", j.findings.len(), j.images.len())
                })
                .collect::<Vec<_>>(),
        )
        .execute(&mut *tx)
        .await?;
    }
    if !updates.is_empty() {
        sqlx::query(
            "UPDATE remediations r SET revision = u.rev, finding_set_digest = u.d, findings = u.f::json,
                    images = u.i::json, build_context = u.c, source_revision = u.v, updated_at = now()
             FROM unnest($1::uuid[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
                  AS u(id, rev, d, f, i, c, v)
             WHERE r.id = u.id",
        )
        .bind(updates.iter().map(|u| u.0).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.1).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.2.clone()).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.3.clone()).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.4.clone()).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.5.context.clone()).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.5.revision.clone()).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;
    }
    if !result.jobs.is_empty() {
        sqlx::query(
            "INSERT INTO remediation_jobs (job_id, remediation_id, revision, finding_set_digest, reason, traceparent)
             SELECT * FROM unnest($1::text[], $2::uuid[], $3::int4[], $4::text[], $5::int2[], $6::text[])
             ON CONFLICT (job_id) DO NOTHING",
        )
        .bind(result.jobs.iter().map(|p| p.job.job_id.clone()).collect::<Vec<_>>())
        .bind(result.jobs.iter().map(|p| p.job.remediation_id.0).collect::<Vec<_>>())
        .bind(result.jobs.iter().map(|p| p.job.revision as i32).collect::<Vec<_>>())
        .bind(result.jobs.iter().map(|p| p.job.finding_set_digest.clone()).collect::<Vec<_>>())
        .bind(result.jobs.iter().map(|p| p.job.reason.code()).collect::<Vec<_>>())
        .bind(result.jobs.iter().map(|p| p.traceparent.clone()).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(result)
}

#[derive(Debug, Default)]
struct NewestRef {
    updated_at: DateTime<Utc>,
    context: String,
    revision: String,
}

#[derive(Debug, Default)]
struct TargetSet<'a> {
    findings: BTreeMap<FindingKey, &'a Finding>,
    images: BTreeSet<ImageSummary>,
    newest: Option<NewestRef>,
}

fn unzip3(groups: &BTreeSet<GroupKey>) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut us = Vec::with_capacity(groups.len());
    let mut fs = Vec::with_capacity(groups.len());
    let mut bs = Vec::with_capacity(groups.len());
    for (u, f, b) in groups {
        us.push(u.clone());
        fs.push(f.clone());
        bs.push(b.clone());
    }
    (us, fs, bs)
}

async fn write_findings(
    tx: &mut Transaction<'_, Postgres>,
    rows: &BTreeMap<RowKey<'_>, &Finding>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO findings (image_digest, vulnerability_id, package_name, package_path, aliases, source_package,
                               source_version, package_type, ecosystem, installed_version, fixed_versions,
                               severity, cvss, layer_digest, purl, title)
         SELECT d, v, n, p, a::jsonb, sp, sv, k, e, iv, fx::jsonb, sev, c::jsonb, l, u, t
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::text[], $9::text[], $10::text[], $11::text[], $12::int2[], $13::text[],
                     $14::text[], $15::text[], $16::text[]) AS r(d, v, n, p, a, sp, sv, k, e, iv, fx, sev, c, l, u, t)
         ON CONFLICT (image_digest, vulnerability_id, package_name, package_path) DO UPDATE SET
             aliases = EXCLUDED.aliases, source_package = EXCLUDED.source_package,
             source_version = EXCLUDED.source_version, package_type = EXCLUDED.package_type,
             ecosystem = EXCLUDED.ecosystem, installed_version = EXCLUDED.installed_version,
             fixed_versions = EXCLUDED.fixed_versions, severity = EXCLUDED.severity, cvss = EXCLUDED.cvss,
             layer_digest = EXCLUDED.layer_digest, purl = EXCLUDED.purl, title = EXCLUDED.title,
             updated_at = now()
         WHERE (findings.aliases, findings.source_package, findings.source_version, findings.package_type,
                findings.ecosystem, findings.installed_version, findings.fixed_versions, findings.severity,
                findings.cvss, findings.layer_digest, findings.purl, findings.title)
               IS DISTINCT FROM
               (EXCLUDED.aliases, EXCLUDED.source_package, EXCLUDED.source_version, EXCLUDED.package_type,
                EXCLUDED.ecosystem, EXCLUDED.installed_version, EXCLUDED.fixed_versions, EXCLUDED.severity,
                EXCLUDED.cvss, EXCLUDED.layer_digest, EXCLUDED.purl, EXCLUDED.title)",
    )
    .bind(rows.keys().map(|k| k.0).collect::<Vec<_>>())
    .bind(rows.keys().map(|k| k.1).collect::<Vec<_>>())
    .bind(rows.keys().map(|k| k.2).collect::<Vec<_>>())
    .bind(rows.keys().map(|k| k.3).collect::<Vec<_>>())
    .bind(rows.values().map(|f| json_text(&f.aliases)).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.package.source_name.as_str()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.package.source_version.as_str()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.package.kind.as_str()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.package.ecosystem.as_str()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.package.version.as_str()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| json_text(&f.fixed_versions)).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.severity.rank()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| json_text(&f.cvss)).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.package.layer.as_str()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.package.purl.as_str()).collect::<Vec<_>>())
    .bind(rows.values().map(|f| f.title.as_str()).collect::<Vec<_>>())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected())
}

/// JSON text of plain data (strings, numbers, derived structs), bound as
/// text and cast to jsonb in SQL: cheaper than building `Value` trees.
/// Serializing such data cannot fail.
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// An outbox row whose job was never confirmed published.
#[derive(Debug, FromRow)]
struct UnpublishedRow {
    job_id: String,
    revision: i32,
    reason: i16,
    traceparent: Option<String>,
    created_at: DateTime<Utc>,
    remediation_id: Uuid,
    current_revision: i32,
    repo_url: String,
    dockerfile: String,
    branch: String,
    build_context: String,
    source_revision: String,
    finding_set_digest: String,
    findings: serde_json::Value,
    images: serde_json::Value,
}

/// Outbox rows older than `min_age_secs` that were never marked published,
/// rebuilt into jobs from the remediation. Rows whose remediation moved on to
/// a newer revision are marked obsolete instead: the newer job supersedes
/// them.
pub async fn unpublished_jobs(pool: &PgPool, min_age_secs: i64) -> Result<Vec<PendingJob>, sqlx::Error> {
    let rows: Vec<UnpublishedRow> = sqlx::query_as(
        "SELECT o.job_id, o.revision, o.reason, o.traceparent, o.created_at, r.id AS remediation_id,
                r.revision AS current_revision, r.repo_url, r.dockerfile, r.branch, r.build_context,
                r.source_revision, r.finding_set_digest, r.findings, r.images
         FROM remediation_jobs o JOIN remediations r ON r.id = o.remediation_id
         WHERE o.published_at IS NULL AND NOT o.obsolete
           AND o.created_at < now() - make_interval(secs => $1)
         ORDER BY o.created_at
         LIMIT 1000",
    )
    .bind(min_age_secs as f64)
    .fetch_all(pool)
    .await?;
    let mut jobs = Vec::new();
    let mut obsolete = Vec::new();
    for row in rows {
        if row.revision != row.current_revision {
            obsolete.push(row.job_id);
            continue;
        }
        let findings: Vec<Finding> = serde_json::from_value(row.findings).unwrap_or_default();
        let images: Vec<ImageSummary> = serde_json::from_value(row.images).unwrap_or_default();
        jobs.push(PendingJob {
            traceparent: row.traceparent,
            job: RemediationJob {
                job_id: row.job_id,
                remediation_id: RemediationId(row.remediation_id),
                revision: u32::try_from(row.revision).unwrap_or(1),
                target: RepositoryTarget {
                    repo_url: row.repo_url,
                    dockerfile: row.dockerfile,
                    context: row.build_context,
                    branch: row.branch,
                    revision: row.source_revision,
                },
                findings,
                images,
                finding_set_digest: row.finding_set_digest,
                reason: JobReason::from_code(row.reason),
                created_at: row.created_at,
            },
        });
    }
    if !obsolete.is_empty() {
        sqlx::query("UPDATE remediation_jobs SET obsolete = true WHERE job_id = ANY($1)")
            .bind(&obsolete)
            .execute(pool)
            .await?;
    }
    Ok(jobs)
}

/// Records that JetStream acknowledged these jobs.
pub async fn mark_published(pool: &PgPool, job_ids: &[String]) -> Result<(), sqlx::Error> {
    if job_ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE remediation_jobs SET published_at = now() WHERE job_id = ANY($1) AND published_at IS NULL",
    )
    .bind(job_ids)
    .execute(pool)
    .await?;
    Ok(())
}

//! Reading OSV records as the real databases publish them, which is not
//! always as the schema says: golang/vulndb's checkout writes every
//! `modified` as `0001-01-01T00:00:00Z`, older osv.dev exports write
//! `"versions": null` or leave `modified` out, pypa/advisory-database keeps
//! YAML, and any database may add fields, ecosystems or range types this
//! build does not know.
//!
//! A scanner that drops an advisory misses a CVE, so a record is refused
//! only when it cannot be stored at all: it is not JSON or YAML, not an
//! object, or has no `id`. Anything less is read as far as it goes, and what
//! could not be used is reported as a [`RecordWarning`] that names the field
//! (`affected[2].ranges[0]`): a list written as `null` is empty (the schema
//! allows leaving it out, and this says the same); a part that does not
//! read (a range of an unknown type, a severity without a score) is left
//! out, its siblings kept; a version written as a number is read as its
//! text. A record in the layout before OSV 1.0 (a top-level `package` and
//! `affects: {ranges, versions}`, as old PYSEC records still are) is read
//! as one `affected` entry. A record that still has nothing a version can
//! be matched against is stored (it answers lookups by id and alias) and
//! warned about.
//!
//! Well-formed records take the direct path (one serde pass); only a record
//! that fails it is read again field by field.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{Affected, Event, OsvPackage, Range, RangeType, Record};

/// How a record file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `*.json`.
    Json,
    /// `*.yaml`, `*.yml`.
    Yaml,
}

impl Format {
    /// The format a file name says, if it names a record file at all.
    pub fn of_name(name: &str) -> Option<Format> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".json") && lower.len() > 5 {
            Some(Format::Json)
        } else if (lower.ends_with(".yaml") && lower.len() > 5)
            || (lower.ends_with(".yml") && lower.len() > 4)
        {
            Some(Format::Yaml)
        } else {
            None
        }
    }
}

/// What kind of thing a warning reports, for summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WarningKind {
    /// `modified` is missing, zero or no time: the record is kept as older
    /// than any dated version of it.
    UndatedModified,
    /// A part of the record could not be read and was left out.
    DroppedPart,
    /// A value had the wrong type and was read as text (a number as a
    /// version).
    ReadAsText,
    /// The layout before OSV 1.0 (`package`, `affects`) was read as one
    /// `affected` entry.
    LegacyLayout,
    /// Nothing in the record can be matched against a package version (no
    /// affected package with a version list or an evaluable range); it is
    /// kept for lookups by id and alias.
    NothingToMatch,
}

impl WarningKind {
    /// A short label for reports.
    pub fn label(self) -> &'static str {
        match self {
            WarningKind::UndatedModified => "no usable `modified`, kept as oldest",
            WarningKind::DroppedPart => "a part could not be read and was left out",
            WarningKind::ReadAsText => "a value of the wrong type was read as text",
            WarningKind::LegacyLayout => "the layout before OSV 1.0 was read as `affected`",
            WarningKind::NothingToMatch => "nothing to match against a version, kept for lookups",
        }
    }
}

/// Something of a record that could not be used as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordWarning {
    /// What kind of problem.
    pub kind: WarningKind,
    /// The field, as a path: `modified`, `affected[2].ranges[0]`.
    pub field: String,
    /// What was wrong with it.
    pub detail: String,
}

/// A record that cannot be stored at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The record's `id`, when one could be read.
    pub id: Option<String>,
    /// The field at fault, when one is: `id`.
    pub field: Option<String>,
    /// Why.
    pub reason: String,
}

/// A record as read, with what could not be used of it.
#[derive(Debug, Clone)]
pub struct Ingested {
    /// The record.
    pub record: Record,
    /// What was left out or assumed, by field.
    pub warnings: Vec<RecordWarning>,
}

/// Reads one record file's bytes.
pub fn read_record(bytes: &[u8], format: Format) -> Result<Ingested, Refusal> {
    let value = match format {
        // A record without `affected` may be in the layout before 1.0,
        // which the direct path would read as affecting nothing.
        Format::Json => match serde_json::from_slice::<Record>(bytes) {
            Ok(record) if !record.id.trim().is_empty() && !record.affected.is_empty() => {
                return Ok(finish(record, Vec::new()));
            }
            _ => serde_json::from_slice::<Value>(bytes).map_err(|e| Refusal {
                id: None,
                field: None,
                reason: format!("not JSON: {e}"),
            })?,
        },
        Format::Yaml => {
            let text = std::str::from_utf8(bytes).map_err(|e| Refusal {
                id: None,
                field: None,
                reason: format!("not UTF-8 text: {e}"),
            })?;
            super::yaml::to_json(text).map_err(|reason| Refusal { id: None, field: None, reason })?
        }
    };
    let mut warnings = Vec::new();
    let record = lenient_record(value, &mut warnings)?;
    Ok(finish(record, warnings))
}

fn finish(record: Record, mut warnings: Vec<RecordWarning>) -> Ingested {
    if record.withdrawn.is_none() && !record.affected.iter().any(matchable) {
        warnings.push(RecordWarning {
            kind: WarningKind::NothingToMatch,
            field: "affected".to_owned(),
            detail: if record.affected.is_empty() {
                "no affected packages".to_owned()
            } else {
                "no affected package with a version list or an ECOSYSTEM or SEMVER range".to_owned()
            },
        });
    }
    Ingested { record, warnings }
}

/// Whether an installed version could ever match this entry.
fn matchable(affected: &Affected) -> bool {
    affected.package.is_some()
        && (!affected.versions.is_empty()
            || affected.ranges.iter().any(|range| range.kind != RangeType::Git && !range.events.is_empty()))
}

/// Field by field, keeping what reads.
fn lenient_record(value: Value, warnings: &mut Vec<RecordWarning>) -> Result<Record, Refusal> {
    let Value::Object(mut map) = value else {
        return Err(Refusal {
            id: None,
            field: None,
            reason: format!("{} is not an OSV record (an object)", kind_of(&value)),
        });
    };
    let refuse_id = |reason: String| Refusal { id: None, field: Some("id".to_owned()), reason };
    let id = match map.remove("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => id,
        Some(Value::String(_)) => return Err(refuse_id("is empty".to_owned())),
        None | Some(Value::Null) => return Err(refuse_id("is missing".to_owned())),
        Some(other) => return Err(refuse_id(format!("is {}, not a string", kind_of(&other)))),
    };
    let mut fields = Fields { map, path: String::new(), warnings };
    // A `modified` the store cannot read is reported there, with the others
    // it cannot order; here only its type matters.
    let modified = fields.text("modified").unwrap_or_default();
    let mut affected = fields.each("affected", lenient_affected);
    if affected.is_empty() && fields.map.contains_key("affects") {
        affected.extend(legacy_affected(&mut fields));
    }
    Ok(Record {
        id,
        modified,
        published: fields.text("published"),
        withdrawn: fields.text("withdrawn"),
        aliases: fields.texts("aliases"),
        upstream: fields.texts("upstream"),
        related: fields.texts("related"),
        summary: fields.text("summary"),
        details: fields.text("details"),
        severity: fields.each("severity", |value, fields| fields.parse(value)),
        affected,
        database_specific: fields.any("database_specific"),
    })
}

fn lenient_affected(value: Value, outer: &mut Fields<'_>) -> Option<Affected> {
    let Value::Object(map) = value else {
        outer.warn(WarningKind::DroppedPart, format!("is {}, not an object", kind_of(&value)));
        return None;
    };
    let mut fields = Fields { map, path: outer.path.clone(), warnings: outer.warnings };
    let package = match fields.map.remove("package") {
        None | Some(Value::Null) => None,
        Some(value) => fields.at("package").parse::<OsvPackage>(value),
    };
    Some(Affected {
        package,
        severity: fields.each("severity", |value, fields| fields.parse(value)),
        ranges: fields.each("ranges", lenient_range),
        versions: fields.texts("versions"),
        ecosystem_specific: fields.any("ecosystem_specific"),
        database_specific: fields.any("database_specific"),
    })
}

/// The layout before OSV 1.0: `package` beside `affects: {ranges:
/// [{type, introduced, fixed}], versions}`. A range without `introduced`
/// starts at the beginning.
fn legacy_affected(fields: &mut Fields<'_>) -> Option<Affected> {
    let package = match fields.map.remove("package") {
        None | Some(Value::Null) => None,
        Some(value) => fields.at("package").parse::<OsvPackage>(value),
    };
    let Some(Value::Object(affects)) = fields.map.remove("affects") else {
        fields.at("affects").warn(WarningKind::DroppedPart, "is not an object".to_owned());
        return None;
    };
    let mut legacy = Fields { map: affects, path: "affects".to_owned(), warnings: fields.warnings };
    let ranges = legacy.each("ranges", |value, fields| {
        let Value::Object(mut range) = value else {
            fields.warn(WarningKind::DroppedPart, format!("is {}, not an object", kind_of(&value)));
            return None;
        };
        let introduced =
            range.remove("introduced").filter(|v| !v.is_null()).unwrap_or_else(|| Value::from("0"));
        let mut events = vec![serde_json::json!({ "introduced": introduced })];
        if let Some(fixed) = range.remove("fixed").filter(|v| !v.is_null()) {
            events.push(serde_json::json!({ "fixed": fixed }));
        }
        range.insert("events".to_owned(), Value::Array(events));
        lenient_range(Value::Object(range), fields)
    });
    let versions = legacy.texts("versions");
    let detail = "read with the top-level `package` as `affected[0]` (the layout before OSV 1.0)".to_owned();
    fields.at("affects").warn(WarningKind::LegacyLayout, detail);
    Some(Affected {
        package,
        severity: Vec::new(),
        ranges,
        versions,
        ecosystem_specific: None,
        database_specific: None,
    })
}

fn lenient_range(value: Value, outer: &mut Fields<'_>) -> Option<Range> {
    let Value::Object(map) = value else {
        outer.warn(WarningKind::DroppedPart, format!("is {}, not an object", kind_of(&value)));
        return None;
    };
    let mut fields = Fields { map, path: outer.path.clone(), warnings: outer.warnings };
    let kind = match fields.map.remove("type") {
        Some(value) => fields.at("type").parse::<RangeType>(value)?,
        None => {
            fields.warn(WarningKind::DroppedPart, "has no `type`".to_owned());
            return None;
        }
    };
    let events = fields.each("events", lenient_event);
    Some(Range { kind, events })
}

/// An event's version written as a number is read as its text; an
/// `introduced` that cannot be read at all opens the range at the start,
/// which errs towards reporting (as `range.rs` does for unparsable ones).
fn lenient_event(value: Value, outer: &mut Fields<'_>) -> Option<Event> {
    let Value::Object(map) = value else {
        outer.warn(WarningKind::DroppedPart, format!("is {}, not an object", kind_of(&value)));
        return None;
    };
    let mut fields = Fields { map, path: outer.path.clone(), warnings: outer.warnings };
    let mut event = Event::default();
    for (key, slot) in [
        ("introduced", &mut event.introduced),
        ("fixed", &mut event.fixed),
        ("last_affected", &mut event.last_affected),
        ("limit", &mut event.limit),
    ] {
        *slot = fields.version(key);
    }
    if event == Event::default() {
        if fields.map.contains_key("introduced") {
            fields.warn(WarningKind::ReadAsText, "`introduced` unreadable: read as \"0\"".to_owned());
            event.introduced = Some("0".to_owned());
        } else {
            fields.warn(WarningKind::DroppedPart, "has no readable event".to_owned());
            return None;
        }
    }
    Some(event)
}

/// The fields of one object being read, and where it is in the record.
struct Fields<'w> {
    map: Map<String, Value>,
    path: String,
    warnings: &'w mut Vec<RecordWarning>,
}

impl Fields<'_> {
    fn field_path(&self, key: &str) -> String {
        if self.path.is_empty() { key.to_owned() } else { format!("{}.{key}", self.path) }
    }

    fn warn(&mut self, kind: WarningKind, detail: String) {
        let field = if self.path.is_empty() { "(record)".to_owned() } else { self.path.clone() };
        self.warnings.push(RecordWarning { kind, field, detail });
    }

    /// The same object, the path pointing at its field `key`.
    fn at(&mut self, key: &str) -> Fields<'_> {
        Fields { map: Map::new(), path: self.field_path(key), warnings: self.warnings }
    }

    /// Reads `value` as `T`, or warns and leaves it out.
    fn parse<T: DeserializeOwned>(&mut self, value: Value) -> Option<T> {
        match serde_json::from_value(value) {
            Ok(parsed) => Some(parsed),
            Err(error) => {
                self.warn(WarningKind::DroppedPart, error.to_string());
                None
            }
        }
    }

    fn any(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|value| !value.is_null())
    }

    fn text(&mut self, key: &str) -> Option<String> {
        match self.map.remove(key)? {
            Value::Null => None,
            Value::String(text) => Some(text),
            other => {
                let detail = format!("is {}, not a string", kind_of(&other));
                self.at(key).warn(WarningKind::DroppedPart, detail);
                None
            }
        }
    }

    /// A version: a string, or a number read as its text.
    fn version(&mut self, key: &str) -> Option<String> {
        match self.map.get(key)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => {
                let text = number.to_string();
                self.at(key).warn(WarningKind::ReadAsText, format!("a number, read as {text:?}"));
                Some(text)
            }
            Value::Null => None,
            other => {
                let detail = format!("is {}, not a version", kind_of(other));
                self.at(key).warn(WarningKind::DroppedPart, detail);
                None
            }
        }
    }

    /// A list of strings (aliases, versions); numbers are read as text.
    fn texts(&mut self, key: &str) -> Vec<String> {
        self.each(key, |value, fields| match value {
            Value::String(text) => Some(text),
            Value::Number(number) => {
                let text = number.to_string();
                fields.warn(WarningKind::ReadAsText, format!("a number, read as {text:?}"));
                Some(text)
            }
            other => {
                fields.warn(WarningKind::DroppedPart, format!("is {}, not a string", kind_of(&other)));
                None
            }
        })
    }

    /// A list read element by element: `null` is empty, an element that
    /// does not read is left out and warned about.
    fn each<T>(&mut self, key: &str, mut read: impl FnMut(Value, &mut Fields<'_>) -> Option<T>) -> Vec<T> {
        let items = match self.map.remove(key) {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Array(items)) => items,
            Some(other) => {
                let detail = format!("is {}, not a list", kind_of(&other));
                self.at(key).warn(WarningKind::DroppedPart, detail);
                return Vec::new();
            }
        };
        let base = self.field_path(key);
        let mut kept = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            let mut fields =
                Fields { map: Map::new(), path: format!("{base}[{index}]"), warnings: self.warnings };
            if let Some(parsed) = read(item, &mut fields) {
                kept.push(parsed);
            }
        }
        kept
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warnings_of(ingested: &Ingested) -> Vec<(WarningKind, &str)> {
        ingested.warnings.iter().map(|w| (w.kind, w.field.as_str())).collect()
    }

    #[test]
    fn well_formed_records_take_the_direct_path_without_warnings() {
        let record = br#"{"id":"GHSA-1","modified":"2024-01-01T00:00:00Z","future_field":{"x":1},
            "affected":[{"package":{"ecosystem":"NewEcosystem","name":"p"},"versions":["1.0"]}]}"#;
        let ingested = read_record(record, Format::Json).expect("read");
        assert!(ingested.warnings.is_empty(), "{:?}", ingested.warnings);
        assert_eq!(ingested.record.affected[0].versions, ["1.0"]);
    }

    #[test]
    fn nulls_are_empty_and_unreadable_parts_are_left_out_by_field() {
        let record =
            br#"{"id":"X-1","aliases":null,"severity":[{"type":"CVSS_V3"},{"type":"Ubuntu","score":"high"}],
            "affected":[
              {"package":{"ecosystem":"Alpine:v3.12","name":"openssl"},"versions":null,
               "ranges":[{"type":"FUTURE","events":[{"introduced":"0"}]},
                         {"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":1.10},{"note":"x"}]}]},
              "not an object"]}"#;
        let ingested = read_record(record, Format::Json).expect("read");
        assert_eq!(ingested.record.id, "X-1");
        assert_eq!(ingested.record.modified, "", "missing: the store warns and keeps it as oldest");
        assert!(ingested.record.aliases.is_empty());
        assert_eq!(ingested.record.severity.len(), 1);
        let affected = &ingested.record.affected;
        assert_eq!(affected.len(), 1);
        assert_eq!(affected[0].ranges.len(), 1);
        assert_eq!(affected[0].ranges[0].kind, RangeType::Ecosystem);
        assert_eq!(affected[0].ranges[0].events[1].fixed.as_deref(), Some("1.1"));
        assert_eq!(
            warnings_of(&ingested),
            [
                (WarningKind::DroppedPart, "affected[0].ranges[0].type"),
                (WarningKind::ReadAsText, "affected[0].ranges[1].events[1].fixed"),
                (WarningKind::DroppedPart, "affected[0].ranges[1].events[2]"),
                (WarningKind::DroppedPart, "affected[1]"),
                (WarningKind::DroppedPart, "severity[0]"),
            ]
        );
        assert!(ingested.warnings[0].detail.contains("FUTURE"), "{:?}", ingested.warnings[0]);
    }

    #[test]
    fn only_a_record_without_an_id_or_shape_is_refused() {
        let refused = |bytes: &[u8]| read_record(bytes, Format::Json).expect_err("refused");
        assert_eq!(refused(br#"{"modified":"2024-01-01T00:00:00Z"}"#).field.as_deref(), Some("id"));
        assert_eq!(refused(br#"{"id":"  "}"#).reason, "is empty");
        assert_eq!(refused(br#"{"id":7}"#).reason, "is a number, not a string");
        assert!(refused(b"[1,2]").reason.contains("a list is not an OSV record"));
        assert!(refused(b"{\"id\":").reason.starts_with("not JSON"));
    }

    #[test]
    fn records_with_nothing_to_match_are_kept_and_said_so() {
        let git_only = br#"{"id":"CVE-1","modified":"2024-01-01T00:00:00Z",
            "affected":[{"ranges":[{"type":"GIT","repo":"https://x","events":[{"introduced":"abc"}]}]}]}"#;
        let ingested = read_record(git_only, Format::Json).expect("kept");
        assert_eq!(warnings_of(&ingested), [(WarningKind::NothingToMatch, "affected")]);
        let withdrawn =
            br#"{"id":"W-1","modified":"2024-01-01T00:00:00Z","withdrawn":"2024-02-01T00:00:00Z"}"#;
        assert!(read_record(withdrawn, Format::Json).expect("kept").warnings.is_empty());
    }

    #[test]
    fn yaml_records_read_like_json_ones() {
        let yaml = "id: PYSEC-2021-1\nmodified: 2021-03-03T01:31:00Z\naffected:\n- package:\n    name: aiohttp\n    ecosystem: PyPI\n  ranges:\n  - type: ECOSYSTEM\n    events:\n    - introduced: \"0\"\n    - fixed: 3.7.4\n  versions:\n  - 0.1\n  - 3.7.3\n";
        let ingested = read_record(yaml.as_bytes(), Format::Yaml).expect("yaml");
        assert!(ingested.warnings.is_empty(), "{:?}", ingested.warnings);
        let affected = &ingested.record.affected[0];
        assert_eq!(affected.versions, ["0.1", "3.7.3"]);
        assert_eq!(affected.ranges[0].events[1].fixed.as_deref(), Some("3.7.4"));
    }

    #[test]
    fn the_layout_before_1_0_reads_as_one_affected_entry() {
        let legacy = br#"{"id":"PYSEC-2021-1","modified":"2021-03-26T20:01:00Z",
            "package":{"name":"aiohttp","ecosystem":"PyPI"},
            "affects":{"ranges":[{"type":"GIT","repo":"https://x","fixed":"abc"},{"type":"ECOSYSTEM","fixed":"3.7.4"}],
                       "versions":["3.7.3"]}}"#;
        let ingested = read_record(legacy, Format::Json).expect("read");
        assert_eq!(warnings_of(&ingested), [(WarningKind::LegacyLayout, "affects")]);
        let affected = &ingested.record.affected[0];
        assert_eq!(affected.package.as_ref().map(|p| p.name.as_str()), Some("aiohttp"));
        assert_eq!(affected.versions, ["3.7.3"]);
        assert_eq!(affected.ranges[1].events[0].introduced.as_deref(), Some("0"));
        assert_eq!(affected.ranges[1].events[1].fixed.as_deref(), Some("3.7.4"));
    }

    #[test]
    fn record_file_names() {
        assert_eq!(Format::of_name("GO-2022-0001.json"), Some(Format::Json));
        assert_eq!(Format::of_name("PYSEC-2021-1.YAML"), Some(Format::Yaml));
        assert_eq!(Format::of_name("x.yml"), Some(Format::Yaml));
        assert_eq!(Format::of_name("vulns/jinja2/PYSEC-2019-217.yaml"), Some(Format::Yaml));
        assert_eq!(Format::of_name("notes.jsonl"), None);
        assert_eq!(Format::of_name(".json"), None);
        assert_eq!(Format::of_name("README.md"), None);
    }
}

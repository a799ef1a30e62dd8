//! The OSV data model (<https://ossf.github.io/osv-schema/>) and the
//! evaluation of its affected ranges.

mod ingest;
mod range;
mod record;
mod yaml;

pub use ingest::{Format, Ingested, RecordWarning, Refusal, WarningKind, read_record};
pub use range::{Evaluation, evaluate};
pub use record::{Affected, Event, OsvPackage, Range, RangeType, Record, Severity as OsvSeverity};

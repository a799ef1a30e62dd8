//! Edits: byte-range replacements on the original text, each with the
//! reason it is made. Nothing outside the ranges changes.

use super::parse::Span;

/// One replacement.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Edit {
    /// The bytes replaced.
    pub span: Span,
    /// What replaces them.
    pub replacement: String,
    /// Why, for the result and the pull request.
    pub reason: String,
}

/// Edits that cannot be applied together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Two edits touch the same bytes.
    #[error("edits overlap at bytes {a:?} and {b:?}")]
    Overlap {
        /// One range.
        a: Span,
        /// The other.
        b: Span,
    },
    /// A range is outside the text or splits a character.
    #[error("edit range {0:?} is not inside the text")]
    OutOfBounds(Span),
}

/// Applies `edits` to `text`. Identical edits are applied once.
pub fn apply(text: &str, edits: &[Edit]) -> Result<String, Error> {
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by_key(|e| (e.span.start, e.span.end));
    sorted.dedup_by(|a, b| a.span == b.span && a.replacement == b.replacement);
    for e in &sorted {
        if e.span.start > e.span.end
            || e.span.end > text.len()
            || !text.is_char_boundary(e.span.start)
            || !text.is_char_boundary(e.span.end)
        {
            return Err(Error::OutOfBounds(e.span.clone()));
        }
    }
    for w in sorted.windows(2) {
        if w[1].span.start < w[0].span.end {
            return Err(Error::Overlap { a: w[0].span.clone(), b: w[1].span.clone() });
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for e in sorted {
        out.push_str(&text[at..e.span.start]);
        out.push_str(&e.replacement);
        at = e.span.end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(span: Span, r: &str) -> Edit {
        Edit { span, replacement: r.into(), reason: String::new() }
    }

    #[test]
    fn applies_in_order_and_refuses_overlaps() {
        assert_eq!(
            apply("FROM a:1\nRUN x\n", &[edit(7..8, "2"), edit(0..4, "from")]).as_deref(),
            Ok("from a:2\nRUN x\n")
        );
        assert!(matches!(apply("abcdef", &[edit(1..3, "x"), edit(2..4, "y")]), Err(Error::Overlap { .. })));
        assert!(matches!(apply("abc", &[edit(2..9, "x")]), Err(Error::OutOfBounds(_))));
        assert_eq!(apply("abc", &[edit(1..2, "X"), edit(1..2, "X")]).as_deref(), Ok("aXc"));
    }
}

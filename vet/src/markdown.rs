//! Text from the repository or the patch, shown in Markdown.

/// `text` as an inline code span it cannot leave, clipped to `max_chars`
/// (then ending in `…`).
///
/// Inside a code span Markdown renders nothing (no HTML, mentions, links
/// or emphasis), so the one way out is a backtick: the span is fenced with
/// one backtick more than the longest run in the text, and padded with a
/// space when the text starts or ends with a backtick or a space (CommonMark
/// strips one such space on each side). Line breaks and other control
/// characters are shown as escapes (`\n`, `\u{1b}`), so the span stays on
/// its line. Not for table cells: a `|` would still split the cell.
///
/// # Examples
///
/// ```
/// use patchpilot_vet::code_span;
///
/// assert_eq!(code_span("ci.yml", 100), "`ci.yml`");
/// assert_eq!(code_span("a`b", 100), "``a`b``");
/// assert_eq!(code_span("`x", 100), "`` `x ``");
/// ```
pub fn code_span(text: &str, max_chars: usize) -> String {
    let mut inner = String::new();
    for c in text.chars().take(max_chars) {
        match c {
            '\n' => inner.push_str("\\n"),
            '\r' => inner.push_str("\\r"),
            '\t' => inner.push_str("\\t"),
            c if c.is_control() => inner.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => inner.push(c),
        }
    }
    if text.chars().count() > max_chars {
        inner.push('…');
    }
    let mut longest = 0;
    let mut run = 0;
    for c in inner.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    if inner.is_empty() {
        // A span needs content; a lone space shows as one.
        return "` `".into();
    }
    let fence = "`".repeat(longest + 1);
    let pad = inner.starts_with(['`', ' ']) || inner.ends_with(['`', ' ']);
    if pad { format!("{fence} {inner} {fence}") } else { format!("{fence}{inner}{fence}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_holds_any_backticks_and_no_line_breaks() {
        assert_eq!(code_span(".github/workflows/ci.yml", 100), "`.github/workflows/ci.yml`");
        assert_eq!(code_span("x`` `y", 100), "```x`` `y```");
        assert_eq!(code_span("`", 100), "`` ` ``");
        assert_eq!(code_span(" a", 100), "`  a `");
        assert_eq!(code_span("", 100), "` `");
        assert_eq!(code_span("a\nb\u{1b}", 100), "`a\\nb\\u{1b}`");
        assert_eq!(code_span("abcdef", 3), "`abc…`");
    }
}

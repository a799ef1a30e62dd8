//! Package installs inside `RUN` lines (`apk add`, `apt-get install`,
//! `apt install`), and edits that drop or raise their version pins while
//! leaving the rest of the line as it was.

use std::ops::Range;

use super::edit::Edit;
use super::parse::{Dockerfile, Instruction, Word};

/// Which package manager a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    /// `apk add`.
    Apk,
    /// `apt-get install` / `apt install`.
    Apt,
}

/// One package argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageArg {
    /// Package name.
    pub name: String,
    /// Pinned version, when the argument pins one with `=`.
    pub version: Option<String>,
    /// The argument word.
    pub word: Word,
}

/// One install command in a `RUN` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallCommand {
    /// The package manager.
    pub manager: Manager,
    /// From its first to its last word, in the instruction's arguments.
    pub range: Range<usize>,
    /// The package arguments.
    pub packages: Vec<PackageArg>,
    /// The separator before it (`&&`, `;`…), in the arguments.
    pub before: Option<Range<usize>>,
    /// The separator after it.
    pub after: Option<Range<usize>>,
}

fn is_separator(w: &str) -> bool {
    matches!(w, "&&" | "||" | ";" | "|")
}

/// Flags that take the next word as their value.
fn takes_value(manager: Manager, flag: &str) -> bool {
    match manager {
        Manager::Apk => matches!(
            flag,
            "-t" | "--virtual"
                | "-X"
                | "--repository"
                | "-p"
                | "--root"
                | "--arch"
                | "--cache-dir"
                | "--keys-dir"
        ),
        Manager::Apt => matches!(flag, "-o" | "-t" | "--target-release" | "-c" | "--config-file"),
    }
}

/// The install commands of a shell-form `RUN`.
pub fn install_commands(ins: &Instruction, escape: char) -> Vec<InstallCommand> {
    if ins.keyword != "RUN" || ins.is_exec_form() {
        return Vec::new();
    }
    let (_, first) = ins.flags(escape);
    let words: Vec<Word> = ins.words(escape).into_iter().skip(first).collect();
    // Split into commands at separators: (words, separator before, after).
    type Segment = (Vec<Word>, Option<Range<usize>>, Option<Range<usize>>);
    let mut commands: Vec<Segment> = Vec::new();
    let mut current = Vec::new();
    let mut before: Option<Range<usize>> = None;
    for w in words {
        if is_separator(&w.text) {
            if !current.is_empty() {
                commands.push((std::mem::take(&mut current), before.clone(), Some(w.range.clone())));
            }
            before = Some(w.range.clone());
        } else {
            current.push(w);
        }
    }
    if !current.is_empty() {
        commands.push((current, before, None));
    }
    let mut out = Vec::new();
    for (words, before, after) in commands {
        // Leading environment assignments: `DEBIAN_FRONTEND=noninteractive apt-get …`.
        let start = words
            .iter()
            .position(|w| !w.text.contains('=') || w.text.starts_with('-'))
            .unwrap_or(words.len());
        let Some(program) = words.get(start) else { continue };
        let (manager, verb) = match program.text.as_str() {
            "apk" => (Manager::Apk, "add"),
            "apt-get" | "apt" => (Manager::Apt, "install"),
            _ => continue,
        };
        let mut i = start + 1;
        let mut found_verb = false;
        while let Some(w) = words.get(i) {
            i += 1;
            if w.text == verb {
                found_verb = true;
                break;
            }
            if takes_value(manager, &w.text) {
                i += 1;
            }
        }
        if !found_verb {
            continue;
        }
        let mut packages = Vec::new();
        while let Some(w) = words.get(i) {
            i += 1;
            if w.text.starts_with('-') {
                if takes_value(manager, &w.text) {
                    i += 1;
                }
                continue;
            }
            let (name, version) = match w.text.split_once('=') {
                // `name>=1.2` pins a minimum, not a version: leave it.
                // `name==ver` is the same exact pin as `name=ver` to apk.
                Some((n, v)) if !n.ends_with(['>', '<', '~']) => {
                    (n.to_owned(), Some(v.trim_start_matches('=').to_owned()))
                }
                _ => (w.text.split(['>', '<', '~', '=']).next().unwrap_or_default().to_owned(), None),
            };
            packages.push(PackageArg { name, version, word: w.clone() });
        }
        let (Some(first), Some(last)) = (words.get(start), words.last()) else { continue };
        out.push(InstallCommand {
            manager,
            range: first.range.start..last.range.end,
            packages,
            before,
            after,
        });
    }
    out
}

/// Deletes `word` from its line: the whole physical line when the word
/// stands alone on it (a package on its own continuation line), else the
/// word and the blanks before it.
pub fn remove_word(df: &Dockerfile, ins: &Instruction, word: &Word, reason: &str) -> Edit {
    let text = df.text();
    let line = df.line_span(&word.span);
    let line_text = &text[line.clone()];
    let rest = format!("{}{}", &text[line.start..word.span.start], &text[word.span.end..line.end]);
    let escape = df.escape();
    let rest_trimmed = rest.trim();
    if rest_trimmed.is_empty() || rest_trimmed == escape.to_string() {
        if rest_trimmed.is_empty() && line.start > ins.span.start {
            // The instruction's last line goes: the line before must stop
            // continuing, or the next instruction would join this one.
            let prev_end = line.start.saturating_sub(1);
            let prev_text = &text[..prev_end];
            let trimmed = prev_text.trim_end();
            if trimmed.ends_with(escape) {
                let esc_at = trimmed.len() - escape.len_utf8();
                let cut = prev_text[..esc_at].trim_end().len();
                return Edit {
                    span: cut..line
                        .end
                        .min(text.len())
                        .saturating_sub(usize::from(line_text.ends_with('\n'))),
                    replacement: String::new(),
                    reason: reason.to_owned(),
                };
            }
        }
        return Edit { span: line, replacement: String::new(), reason: reason.to_owned() };
    }
    let before = &text[line.start..word.span.start];
    let blanks = before.len() - before.trim_end_matches([' ', '\t']).len();
    if blanks > 0 {
        Edit {
            span: word.span.start - blanks..word.span.end,
            replacement: String::new(),
            reason: reason.to_owned(),
        }
    } else {
        let after = &text[word.span.end..line.end];
        let blanks = after.len() - after.trim_start_matches([' ', '\t']).len();
        Edit {
            span: word.span.start..word.span.end + blanks,
            replacement: String::new(),
            reason: reason.to_owned(),
        }
    }
}

/// Deletes a whole install command with one of its separators; the whole
/// instruction when it is the only command.
pub fn remove_command(df: &Dockerfile, ins: &Instruction, command: &InstallCommand, reason: &str) -> Edit {
    let args = &ins.args;
    let (range, whole) = match (&command.before, &command.after) {
        (_, Some(after)) => {
            let end = after.end + (args[after.end..].len() - args[after.end..].trim_start().len());
            let (_, first) = ins.flags(df.escape());
            let first_word = ins.words(df.escape()).get(first).map(|w| w.range.start).unwrap_or(0);
            (command.range.start..end, command.range.start == first_word && command.before.is_none())
        }
        (Some(before), None) => {
            let start = args[..before.start].trim_end().len();
            (start..command.range.end, false)
        }
        (None, None) => (command.range.clone(), true),
    };
    if whole && command.after.is_none() {
        return Edit { span: df.line_span(&ins.span), replacement: String::new(), reason: reason.to_owned() };
    }
    Edit { span: ins.span_of(range), replacement: String::new(), reason: reason.to_owned() }
}

/// Replaces the pinned version of `package` with `version`.
pub fn set_pin(ins: &Instruction, package: &PackageArg, version: &str, reason: &str) -> Option<Edit> {
    let first = package.word.text.find('=')?;
    let at =
        first + package.word.text[first..].len() - package.word.text[first..].trim_start_matches('=').len();
    let start = package.word.range.start + at;
    Some(Edit {
        span: ins.span_of(start..package.word.range.end),
        replacement: version.to_owned(),
        reason: reason.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dockerfile::edit::apply;

    fn first_run(text: &str) -> (Dockerfile, Instruction) {
        let df = Dockerfile::parse(text).expect("parses");
        let ins = df.instructions().iter().find(|i| i.keyword == "RUN").cloned().expect("a RUN");
        (df, ins)
    }

    #[test]
    fn finds_pins_after_flags_and_env() {
        let (_, ins) = first_run(
            "FROM x\nRUN apk --no-cache add -t .deps curl libssl3=3.1.4-r5 'zlib>=1.3' && DEBIAN_FRONTEND=noninteractive apt-get install -y -o Dpkg::Options::=--force-confnew tzdata=2024a-0\n",
        );
        let cmds = install_commands(&ins, '\\');
        assert_eq!(cmds.len(), 2);
        let apk: Vec<(String, Option<String>)> =
            cmds[0].packages.iter().map(|p| (p.name.clone(), p.version.clone())).collect();
        assert_eq!(apk[0], ("curl".into(), None));
        assert_eq!(apk[1], ("libssl3".into(), Some("3.1.4-r5".into())));
        assert_eq!(apk.len(), 3, "'.deps' is the -t value, not a package");
        assert_eq!(cmds[1].manager, Manager::Apt);
        assert_eq!(cmds[1].packages.len(), 1);
        assert_eq!(cmds[1].packages[0].version.as_deref(), Some("2024a-0"));
    }

    #[test]
    fn removing_a_package_on_its_own_line_removes_the_line() {
        let text = "FROM x\nRUN apk add --no-cache \\\n    curl \\\n    libssl3=3.1.4-r5 \\\n    zlib\nCMD [\"sh\"]\n";
        let (df, ins) = first_run(text);
        let cmd = &install_commands(&ins, '\\')[0];
        let e = remove_word(&df, &ins, &cmd.packages[1].word, "drop");
        assert_eq!(
            apply(text, &[e]).expect("applies"),
            "FROM x\nRUN apk add --no-cache \\\n    curl \\\n    zlib\nCMD [\"sh\"]\n"
        );
        // The last line: the line before stops continuing.
        let e = remove_word(&df, &ins, &cmd.packages[2].word, "drop");
        assert_eq!(
            apply(text, &[e]).expect("applies"),
            "FROM x\nRUN apk add --no-cache \\\n    curl \\\n    libssl3=3.1.4-r5\nCMD [\"sh\"]\n"
        );
    }

    #[test]
    fn removing_a_package_inline_keeps_the_spacing_around_others() {
        let text = "FROM x\nRUN apk add --no-cache curl libssl3=3.1.4-r5 zlib\n";
        let (df, ins) = first_run(text);
        let cmd = &install_commands(&ins, '\\')[0];
        let e = remove_word(&df, &ins, &cmd.packages[1].word, "drop");
        assert_eq!(apply(text, &[e]).expect("applies"), "FROM x\nRUN apk add --no-cache curl zlib\n");
    }

    #[test]
    fn removing_whole_commands() {
        let only = "FROM x\nRUN apk add --no-cache libcrypto3=3.1.4-r5 libssl3=3.1.4-r5\nCOPY . .\n";
        let (df, ins) = first_run(only);
        let cmd = &install_commands(&ins, '\\')[0];
        assert_eq!(
            apply(only, &[remove_command(&df, &ins, cmd, "drop")]).expect("applies"),
            "FROM x\nCOPY . .\n"
        );

        let first = "FROM x\nRUN apk add --no-cache \\\n      libssl3=1 \\\n  && make\n";
        let (df, ins) = first_run(first);
        let cmd = &install_commands(&ins, '\\')[0];
        assert_eq!(
            apply(first, &[remove_command(&df, &ins, cmd, "drop")]).expect("applies"),
            "FROM x\nRUN make\n"
        );

        let last = "FROM x\nRUN make && \\\n    apk add libssl3=1\n";
        let (df, ins) = first_run(last);
        let cmd = &install_commands(&ins, '\\')[0];
        assert_eq!(
            apply(last, &[remove_command(&df, &ins, cmd, "drop")]).expect("applies"),
            "FROM x\nRUN make\n"
        );
    }

    #[test]
    fn raising_a_pin_touches_only_the_version() {
        let text =
            "FROM x\nRUN apt-get install -y openssl=3.0.11-1~deb12u1 \\\n && rm -rf /var/lib/apt/lists/*\n";
        let (_, ins) = first_run(text);
        let cmd = &install_commands(&ins, '\\')[0];
        let e = set_pin(&ins, &cmd.packages[0], "3.0.11-1~deb12u2", "raise").expect("pinned");
        assert_eq!(
            apply(text, &[e]).expect("applies"),
            "FROM x\nRUN apt-get install -y openssl=3.0.11-1~deb12u2 \\\n && rm -rf /var/lib/apt/lists/*\n"
        );
    }
}

//! What a Dockerfile means: stages, their bases, build arguments and how
//! they feed `FROM` lines.

use super::parse::{Dockerfile, Instruction, Span, Word};

/// An image reference split into parts, with the offsets of tag and digest
/// inside the text it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// `registry/path/name` as written.
    pub repository: String,
    /// The tag, if any.
    pub tag: Option<String>,
    /// The digest, if any.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Splits a reference; never fails.
    pub fn parse(text: &str) -> ImageRef {
        let (rest, digest) = match text.split_once('@') {
            Some((r, d)) => (r, Some(d.to_owned())),
            None => (text, None),
        };
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        match rest[last_slash..].rfind(':') {
            Some(c) => ImageRef {
                repository: rest[..last_slash + c].to_owned(),
                tag: Some(rest[last_slash + c + 1..].to_owned()),
                digest,
            },
            None => ImageRef { repository: rest.to_owned(), tag: None, digest },
        }
    }

    /// `repository[:tag][@digest]`.
    pub fn render(&self) -> String {
        let mut s = self.repository.clone();
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(d);
        }
        s
    }
}

/// A build argument declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// Its name.
    pub name: String,
    /// Its default value, quotes removed.
    pub default: Option<String>,
    /// Where the default value is in the file (inside the quotes, if any).
    pub default_span: Option<Span>,
    /// Index of the `ARG` instruction.
    pub instruction: usize,
}

/// What a stage builds on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// An image from a registry (build arguments substituted).
    Image(ImageRef),
    /// An earlier stage, by index.
    Stage(usize),
    /// `FROM scratch`.
    Scratch,
}

/// One build stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// 0-based position.
    pub index: usize,
    /// Index of its `FROM` instruction.
    pub from: usize,
    /// The image word of the `FROM` line, as written.
    pub image: Word,
    /// `--platform=…`, as written.
    pub platform: Option<String>,
    /// `AS name`, lowercased as BuildKit compares it.
    pub name: Option<String>,
    /// What it builds on.
    pub base: Base,
    /// Names of the build arguments the `FROM` line used.
    pub uses_args: Vec<String>,
    /// Indexes of its instructions after `FROM`.
    pub body: std::ops::Range<usize>,
}

/// Substitutes `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
/// `${VAR:+alt}` and `${VAR+alt}` from `lookup`; returns the result and
/// the variables it used.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut used = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                out.push_str(&rest[i..]);
                return (out, used);
            };
            let inner = &body[..end];
            let (name, op, word) = match inner.find([':', '-', '+']) {
                Some(p) => {
                    let name = &inner[..p];
                    let op_len =
                        if inner[p..].starts_with(":-") || inner[p..].starts_with(":+") { 2 } else { 1 };
                    (name, &inner[p..p + op_len], &inner[p + op_len..])
                }
                None => (inner, "", ""),
            };
            used.push(name.to_owned());
            let value = lookup(name);
            let set_nonempty = value.as_deref().is_some_and(|v| !v.is_empty());
            let replacement = match op {
                ":-" => {
                    if set_nonempty {
                        value.unwrap_or_default()
                    } else {
                        word.to_owned()
                    }
                }
                "-" => value.unwrap_or_else(|| word.to_owned()),
                ":+" => {
                    if set_nonempty {
                        word.to_owned()
                    } else {
                        String::new()
                    }
                }
                "+" => {
                    if value.is_some() {
                        word.to_owned()
                    } else {
                        String::new()
                    }
                }
                _ => value.unwrap_or_default(),
            };
            out.push_str(&replacement);
            rest = &body[end + 1..];
        } else {
            let starts_name = after.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            let len = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            if len == 0 || !starts_name {
                out.push('$');
                rest = after;
                continue;
            }
            let name = &after[..len];
            used.push(name.to_owned());
            out.push_str(&lookup(name).unwrap_or_default());
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    (out, used)
}

fn unquote(s: &str) -> (&str, usize) {
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return (&s[1..s.len() - 1], 1);
        }
    }
    (s, 0)
}

/// The `ARG` declarations of one instruction.
pub fn args_of(df: &Dockerfile, index: usize, instruction: &Instruction) -> Vec<Arg> {
    instruction
        .words(df.escape())
        .into_iter()
        .map(|w| match w.text.split_once('=') {
            Some((name, value)) => {
                let (inner, q) = unquote(value);
                let start = w.range.start + name.len() + 1 + q;
                Arg {
                    name: name.to_owned(),
                    default: Some(inner.to_owned()),
                    default_span: Some(instruction.span_of(start..start + inner.len())),
                    instruction: index,
                }
            }
            None => Arg { name: w.text.clone(), default: None, default_span: None, instruction: index },
        })
        .collect()
}

impl Dockerfile {
    /// `ARG`s declared before the first `FROM`: the ones `FROM` lines can use.
    pub fn global_args(&self) -> Vec<Arg> {
        let mut out = Vec::new();
        for (i, ins) in self.instructions().iter().enumerate() {
            if ins.keyword == "FROM" {
                break;
            }
            if ins.keyword == "ARG" {
                out.extend(args_of(self, i, ins));
            }
        }
        out
    }

    /// The stages, in order.
    pub fn stages(&self) -> Vec<Stage> {
        // Each global ARG's default may use the ones declared before it
        // (`ARG IMAGE="golang:${GO_VERSION}-bookworm"`).
        let mut globals: Vec<(String, Option<String>)> = Vec::new();
        for arg in self.global_args() {
            let value = arg.default.as_ref().map(|d| {
                let known =
                    |name: &str| globals.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| v.clone());
                expand(d, &known).0
            });
            globals.push((arg.name, value));
        }
        let lookup = |name: &str| globals.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| v.clone());
        let from_indexes: Vec<usize> = self
            .instructions()
            .iter()
            .enumerate()
            .filter(|(_, i)| i.keyword == "FROM")
            .map(|(i, _)| i)
            .collect();
        let mut stages: Vec<Stage> = Vec::new();
        for (n, &from) in from_indexes.iter().enumerate() {
            let ins = &self.instructions()[from];
            let (flags, first) = ins.flags(self.escape());
            let words = ins.words(self.escape());
            let Some(image) = words.get(first).cloned() else { continue };
            let name = match (words.get(first + 1), words.get(first + 2)) {
                (Some(kw), Some(alias)) if kw.text.eq_ignore_ascii_case("as") => {
                    Some(alias.text.to_ascii_lowercase())
                }
                _ => None,
            };
            let platform = flags.iter().find(|(n, _)| n == "platform").map(|(_, w)| w.text.clone());
            let (resolved, uses_args) = expand(&image.text, &lookup);
            let base = if resolved.eq_ignore_ascii_case("scratch") {
                Base::Scratch
            } else if let Some(prev) =
                stages.iter().find(|s| s.name.as_deref() == Some(&resolved.to_ascii_lowercase()))
            {
                Base::Stage(prev.index)
            } else {
                Base::Image(ImageRef::parse(&resolved))
            };
            let end = from_indexes.get(n + 1).copied().unwrap_or(self.instructions().len());
            stages.push(Stage {
                index: n,
                from,
                image,
                platform,
                name,
                base,
                uses_args,
                body: from + 1..end,
            });
        }
        stages
    }

    /// The stage that produces the image: the last one.
    pub fn final_stage(&self) -> Option<Stage> {
        self.stages().pop()
    }

    /// The stages the final image is built from, transitively through
    /// `FROM <stage>` (not through `COPY --from`, whose files are copied,
    /// not inherited).
    pub fn final_chain(&self) -> Vec<Stage> {
        let stages = self.stages();
        let mut chain = Vec::new();
        let mut next = stages.last().cloned();
        while let Some(stage) = next {
            next = match stage.base {
                Base::Stage(i) => stages.get(i).cloned(),
                _ => None,
            };
            chain.push(stage);
        }
        chain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_args_and_the_final_image() {
        let text = "ARG GO_VERSION=1.22.1\nARG VARIANT=\"alpine3.19\"\nFROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-${VARIANT} AS Build\nRUN go build\nFROM build AS test\nFROM alpine:3.19@sha256:abc\nCOPY --from=build /app /app\n";
        let df = Dockerfile::parse(text).expect("parses");
        let args = df.global_args();
        assert_eq!(args.len(), 2);
        assert_eq!(&text[args[1].default_span.clone().expect("span")], "alpine3.19");
        let stages = df.stages();
        assert_eq!(stages.len(), 3);
        assert_eq!(stages[0].base, Base::Image(ImageRef::parse("golang:1.22.1-alpine3.19")));
        assert_eq!(stages[0].uses_args, vec!["GO_VERSION", "VARIANT"]);
        assert_eq!(stages[0].platform.as_deref(), Some("--platform=$BUILDPLATFORM"));
        assert_eq!(stages[1].base, Base::Stage(0), "stage names compare case-insensitively");
        let last = df.final_stage().expect("final");
        assert_eq!(
            last.base,
            Base::Image(ImageRef {
                repository: "alpine".into(),
                tag: Some("3.19".into()),
                digest: Some("sha256:abc".into())
            })
        );
        assert_eq!(df.final_chain().len(), 1);
    }

    #[test]
    fn expansion_forms() {
        let lookup = |n: &str| match n {
            "A" => Some("1".to_owned()),
            "E" => Some(String::new()),
            _ => None,
        };
        assert_eq!(expand("x${A}y$A", &lookup).0, "x1y1");
        assert_eq!(expand("${B:-def}", &lookup).0, "def");
        assert_eq!(expand("${E:-def}|${E-def}", &lookup).0, "def|");
        assert_eq!(expand("${A:+alt}${B:+alt}", &lookup).0, "alt");
        assert_eq!(expand("cost $5", &lookup).0, "cost $5");
    }

    #[test]
    fn image_refs() {
        let r = ImageRef::parse("127.0.0.1:5000/library/golang:1.22-alpine@sha256:ab");
        assert_eq!(r.repository, "127.0.0.1:5000/library/golang");
        assert_eq!(r.tag.as_deref(), Some("1.22-alpine"));
        assert_eq!(r.render(), "127.0.0.1:5000/library/golang:1.22-alpine@sha256:ab");
        assert_eq!(ImageRef::parse("localhost:5000/app").tag, None);
    }
}

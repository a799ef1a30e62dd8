//! The Dockerfile model against real-world Dockerfiles
//! (`tests/corpus/dockerfiles/`, sources in `SOURCES.md`): every file
//! parses, round-trips byte for byte, accounts for every line, maps each
//! word back to the bytes it came from, and edits change only their token.

use std::path::PathBuf;

use patchpilot_agent::dockerfile::shell::install_commands;
use patchpilot_agent::dockerfile::{Base, Dockerfile, Edit, apply};

/// Keywords BuildKit's frontend accepts (`MAINTAINER` and `ONBUILD` too).
const KEYWORDS: &[&str] = &[
    "ADD",
    "ARG",
    "CMD",
    "COPY",
    "ENTRYPOINT",
    "ENV",
    "EXPOSE",
    "FROM",
    "HEALTHCHECK",
    "LABEL",
    "MAINTAINER",
    "ONBUILD",
    "RUN",
    "SHELL",
    "STOPSIGNAL",
    "USER",
    "VOLUME",
    "WORKDIR",
];

fn corpus() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/dockerfiles");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("corpus folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "Dockerfile"))
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect();
    files.sort();
    files
}

fn named<'a>(files: &'a [(String, String)], prefix: &str) -> &'a str {
    &files.iter().find(|(n, _)| n.starts_with(prefix)).unwrap_or_else(|| panic!("no corpus file {prefix}")).1
}

#[test]
fn corpus_has_its_sources_named() {
    let files = corpus();
    assert!(files.len() >= 25, "the corpus needs at least 25 files, has {}", files.len());
    let sources = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/dockerfiles/SOURCES.md"),
    )
    .expect("SOURCES.md");
    for (name, _) in &files {
        let number = name.split('-').next().unwrap_or_default();
        assert!(
            sources.contains(name) || sources.contains(&format!("| {number} ")),
            "{name} has no entry in SOURCES.md"
        );
    }
}

/// Every file parses, and every physical line is a directive, a comment, a
/// blank line, or part of exactly one instruction.
#[test]
fn every_file_round_trips_and_every_line_is_accounted_for() {
    let (mut with_continuations, mut with_heredocs) = (0, 0);
    for (name, text) in corpus() {
        let df = Dockerfile::parse(&text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(df.text(), text, "{name}: printing is not byte-identical");
        assert!(!df.instructions().is_empty(), "{name}: no instructions");
        let mut previous_end = 0;
        for ins in df.instructions() {
            assert!(
                ins.span.start >= previous_end,
                "{name}: instructions overlap at byte {}",
                ins.span.start
            );
            previous_end = ins.span.end;
            let keyword = &text[ins.keyword_span.clone()];
            assert!(
                keyword.eq_ignore_ascii_case(&ins.keyword),
                "{name}: keyword span `{keyword}` is not {}",
                ins.keyword
            );
            assert!(
                KEYWORDS.contains(&ins.keyword.as_str()) || name.contains("invalid"),
                "{name}: unknown keyword {}",
                ins.keyword
            );
            with_continuations +=
                usize::from(text[ins.span.clone()].contains('\n') && ins.heredocs.is_empty());
            with_heredocs += usize::from(!ins.heredocs.is_empty());
            // Each word maps back to the bytes it came from; a word
            // broken by a continuation starts and ends on its own bytes.
            for word in ins.words(df.escape()) {
                let raw = &text[word.span.clone()];
                if !raw.contains('\n') {
                    assert_eq!(raw, word.text, "{name}: word span of `{}`", word.text);
                } else {
                    assert!(
                        raw.starts_with(&word.text[..1]) && raw.ends_with(&word.text[word.text.len() - 1..]),
                        "{name}: `{raw}`"
                    );
                }
            }
        }
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let content = line.trim_end_matches(['\n', '\r']);
            let trimmed = content.trim();
            let covered = df
                .instructions()
                .iter()
                .any(|i| i.span.start <= offset + content.len() && offset < i.span.end.max(i.span.start + 1));
            let directive = df.directives().iter().any(|d| d.span.start == offset);
            assert!(
                trimmed.is_empty() || trimmed.starts_with('#') || covered || directive,
                "{name}: line at byte {offset} belongs to nothing: {content:?}"
            );
            offset += line.len();
        }
    }
    assert!(with_continuations > 50, "the corpus should exercise continuations, saw {with_continuations}");
    assert!(with_heredocs >= 3, "the corpus should exercise heredocs, saw {with_heredocs}");
}

/// Changing one token changes only its bytes: the rest of the file is
/// byte-identical, continuation lines and comments included.
#[test]
fn editing_a_from_image_touches_only_that_token() {
    for (name, text) in corpus() {
        let df = Dockerfile::parse(&text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for stage in df.stages() {
            let marker = "example.test/patched:1";
            let edit =
                Edit { span: stage.image.span.clone(), replacement: marker.into(), reason: "test".into() };
            let edited = apply(&text, &[edit]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&edited[..stage.image.span.start], &text[..stage.image.span.start], "{name}");
            assert_eq!(
                &edited[stage.image.span.start + marker.len()..],
                &text[stage.image.span.end..],
                "{name}"
            );
            let again = Dockerfile::parse(&edited).unwrap_or_else(|e| panic!("{name} after the edit: {e:?}"));
            assert_eq!(again.stages()[stage.index].image.text, marker, "{name}");
        }
    }
}

#[test]
fn arguments_feed_from_lines_and_stages_resolve() {
    let files = corpus();
    // buildkit: `golang:${GO_VERSION}-alpine${ALPINE_VERSION}` from global ARGs.
    let buildkit = Dockerfile::parse(named(&files, "01-")).expect("parses");
    let golatest = buildkit
        .stages()
        .into_iter()
        .find(|s| s.name.as_deref() == Some("golatest"))
        .expect("golatest stage");
    match &golatest.base {
        Base::Image(image) => assert_eq!(image.render(), "golang:1.21-alpine3.18"),
        other => panic!("golatest builds on {other:?}"),
    }
    assert_eq!(golatest.uses_args, vec!["GO_VERSION".to_owned(), "ALPINE_VERSION".to_owned()]);
    assert_eq!(golatest.platform.as_deref(), Some("--platform=$BUILDPLATFORM"));
    let riscv =
        buildkit.stages().into_iter().find(|s| s.name.as_deref() == Some("alpine-riscv64")).expect("stage");
    match &riscv.base {
        Base::Image(image) => {
            assert!(image.digest.as_deref().is_some_and(|d| d.starts_with("sha256:2d01a16b")), "{image:?}")
        }
        other => panic!("{other:?}"),
    }
    // Stages built on stages.
    let gobuild =
        buildkit.stages().into_iter().find(|s| s.name.as_deref() == Some("gobuild-base")).expect("stage");
    assert_eq!(gobuild.base, Base::Stage(golatest.index));

    // moby: an ARG built from other ARGs feeds FROM.
    let moby = Dockerfile::parse(named(&files, "42-")).expect("parses");
    let images: Vec<String> = moby
        .stages()
        .into_iter()
        .filter_map(|s| match s.base {
            Base::Image(i) => Some(i.render()),
            _ => None,
        })
        .collect();
    assert!(images.contains(&"golang:1.19.3-bullseye".to_owned()), "{images:?}");

    // The final stage and the chain it builds on.
    let distroless = Dockerfile::parse(named(&files, "08-")).expect("parses");
    let final_stage = distroless.final_stage().expect("a final stage");
    assert_eq!(final_stage.index, distroless.stages().len() - 1);
    match &distroless.final_chain().last().expect("chain").base {
        Base::Image(image) => assert!(image.repository.contains("distroless"), "{image:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn package_pins_are_found_in_real_files() {
    let files = corpus();
    let pins = |prefix: &str| -> Vec<(String, String)> {
        let df = Dockerfile::parse(named(&files, prefix)).expect("parses");
        df.instructions()
            .iter()
            .flat_map(|i| install_commands(i, df.escape()))
            .flat_map(|c| c.packages)
            .filter_map(|p| p.version.map(|v| (p.name, v)))
            .collect()
    };
    assert_eq!(
        pins("37-"),
        [
            ("bash", "5.2.26-r0"),
            ("gcc", "13.2.1_git20240309-r0"),
            ("musl-dev", "1.2.5-r0"),
            ("libffi-dev", "3.4.6-r0")
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
    );
    // `==` is apk's exact pin too.
    assert!(pins("14-").contains(&("openssh-client".into(), "9.3_p2-r3".into())), "{:?}", pins("14-"));
    assert!(pins("16-").contains(&("ca-certificates".into(), "20180409".into())), "{:?}", pins("16-"));
}

/// The same files with Windows line ends (the stored copies have none):
/// byte-identical, and the same instructions and words as with `\n`.
#[test]
fn crlf_line_ends_parse_like_lf() {
    for (name, text) in corpus() {
        let crlf = text.replace('\n', "\r\n");
        let lf = Dockerfile::parse(&text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let windows = Dockerfile::parse(&crlf).unwrap_or_else(|e| panic!("{name} with CRLF: {e:?}"));
        assert_eq!(windows.text(), crlf, "{name}");
        let shape = |df: &Dockerfile| -> Vec<(String, Vec<String>)> {
            df.instructions()
                .iter()
                .filter(|i| i.heredocs.is_empty())
                .map(|i| (i.keyword.clone(), i.words(df.escape()).into_iter().map(|w| w.text).collect()))
                .collect()
        };
        assert_eq!(shape(&windows), shape(&lf), "{name}");
        for ins in windows.instructions() {
            for word in ins.words(windows.escape()) {
                assert!(!word.text.contains('\r'), "{name}: a word kept a carriage return: {:?}", word.text);
            }
        }
    }
}
